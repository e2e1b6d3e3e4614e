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

# The learning loop on the fake backend (docs/learning.md): labels into a
# store, annotate, fit with leave-one-card-out, bench. The store and results
# live under $WORK, so the demo leaves nothing behind.
LABELS=(--set "labels.dir=$WORK/labels")
CARD=data/cards/DP1.10022.001.bet_sorting.md
step "$CLI learn ingest --labels data/bench/labels.jsonl"
"$CLI" learn ingest --labels data/bench/labels.jsonl "${LABELS[@]}"
step "$CLI annotate --card $CARD --candidates data/candidates/DP1.10022.001.bet_sorting.json --backend fake --level auto   # auto = L0: nothing fit yet"
"$CLI" annotate --card "$CARD" --candidates data/candidates/DP1.10022.001.bet_sorting.json \
  --backend fake --level auto "${LABELS[@]}" >"$WORK/annotate.txt"
head -n 8 "$WORK/annotate.txt"
step "$CLI learn fit --backend fake --question column.aspect --level L2 --out \$WORK/fit   # first lines"
"$CLI" learn fit --backend fake --question column.aspect --level L2 --out "$WORK/fit" \
  "${LABELS[@]}" >"$WORK/fit.json"
head -n 12 "$WORK/fit.json"
# ---- learn promote slots in here (the bundle store, branch `bundles`): the
# ---- fit becomes a bundle version, `learn promote --version N --question
# ---- column.aspect` makes it CURRENT, and annotate at auto is run again to
# ---- show column.aspect served at L2. Until it lands, the fit's files are
# ---- in $WORK/fit (artifacts.json, manifest.json, report.json).
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
