#!/usr/bin/env bash
# make demo: start mesa-anyjevd on its embedded fake model, drive it with the
# CLI, show what came back, and stop it with SIGTERM (a clean drain, exit 0).
set -euo pipefail
BUILD_DIR="${1:-build}"
DAEMON="$BUILD_DIR/server/mesa-anyjevd"
CLI="$BUILD_DIR/client/mesa-anyjev"
WORK="$(mktemp -d)"
trap 'kill "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step "$DAEMON --model fake --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 &"
"$DAEMON" --model fake --listen 127.0.0.1:0 --port-file "$WORK/port" \
  --metrics-listen 127.0.0.1:0 --set server.metrics_port_file="$WORK/metrics-port" \
  --set decisions.bundles_dir="$WORK/bundles" \
  2> >(sed 's/^/  [daemon] /' >&2) &
PID=$!
for _ in $(seq 1 300); do [ -s "$WORK/port" ] && [ -s "$WORK/metrics-port" ] && break; sleep 0.1; done
ADDRESS="127.0.0.1:$(cat "$WORK/port")"
for _ in $(seq 1 300); do "$CLI" health --address "$ADDRESS" >/dev/null 2>&1 && break; sleep 0.1; done

step "$CLI --version"
"$CLI" --version
step "$CLI health --address $ADDRESS"
"$CLI" health --address "$ADDRESS"
step "$CLI info --address $ADDRESS"
"$CLI" info --address "$ADDRESS"
step "$CLI info --address $ADDRESS --json"
"$CLI" info --address "$ADDRESS" --json
step "curl -s http://127.0.0.1:$(cat "$WORK/metrics-port")/metrics | grep -E '^mesa_anyjev_(build_info|requests_total|model_loaded|queue_depth)'"
curl -s "http://127.0.0.1:$(cat "$WORK/metrics-port")/metrics" |
  grep -E '^mesa_anyjev_(build_info|requests_total|model_loaded|queue_depth)' | grep -v ' 0$' || true

# The learning loop through the daemon (docs/learning.md, docs/bundles.md):
# labels into a store, annotate at auto (L0: nothing fit yet), fit an L2
# head with leave-one-card-out (a new bundle version in the daemon's store),
# promote it (the daemon picks it up live), annotate again (column.aspect now
# at L2), bench. Everything lives under $WORK.
HF=(--backend hf --set "client.address=$ADDRESS" --set backend.hf_model=fake)
LABELS=(--set "labels.dir=$WORK/labels")
CARD=data/cards/DP1.10022.001.bet_sorting.md
CANDIDATES=data/candidates/DP1.10022.001.bet_sorting.json
levels() {  # decisions of a run record by question and level
  python3 -c 'import collections, json, sys
run = json.load(open(sys.argv[1]))
counts = collections.Counter((d["question_id"], d["level"]) for d in run["decisions"])
for (q, level), n in sorted(counts.items()):
    print(f"    {q:26s} {level:5s} {n}")' "$1"
}
step "$CLI learn ingest --labels data/bench/labels.jsonl"
"$CLI" learn ingest --labels data/bench/labels.jsonl "${LABELS[@]}"
step "$CLI annotate --backend hf --card $CARD --candidates $CANDIDATES --level auto   # levels served:"
"$CLI" annotate "${HF[@]}" --card "$CARD" --candidates "$CANDIDATES" --level auto \
  --json >"$WORK/run1.json"
levels "$WORK/run1.json"
step "$CLI learn fit --backend hf --question column.aspect --level L2   # first lines"
"$CLI" learn fit "${HF[@]}" --question column.aspect --level L2 "${LABELS[@]}" >"$WORK/fit.json"
head -n 12 "$WORK/fit.json"
VERSION="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$WORK/fit.json")"
step "$CLI learn promote --backend hf --version $VERSION --question column.aspect"
"$CLI" learn promote "${HF[@]}" --version "$VERSION" --question column.aspect
step "$CLI bundles list --backend hf --question column.aspect"
"$CLI" bundles list "${HF[@]}" --question column.aspect
step "$CLI annotate --backend hf --card $CARD --candidates $CANDIDATES --level auto   # again"
"$CLI" annotate "${HF[@]}" --card "$CARD" --candidates "$CANDIDATES" --level auto \
  --json >"$WORK/run2.json"
levels "$WORK/run2.json"
step "$CLI bench run --backend fake --levels raw,L0,L2 --out \$WORK/bench --date 2026-01-02"
"$CLI" bench run --backend fake --levels raw,L0,L2 --out "$WORK/bench" --date 2026-01-02 \
  "${LABELS[@]}" >"$WORK/bench.txt"
head -n 1 "$WORK/bench.txt"
step "$CLI bench table --results \$WORK/bench/2026-01-02/fake.fake.json"
"$CLI" bench table --results "$WORK/bench/2026-01-02/fake.fake.json"

step "kill -TERM $PID   # graceful drain"
kill -TERM "$PID"
set +e
wait "$PID"
CODE=$?
set -e
echo "mesa-anyjevd exited with code $CODE"
[ "$CODE" -eq 0 ]
