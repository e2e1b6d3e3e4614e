#!/usr/bin/env bash
# make demo: the README's path, end to end. First the CLI alone on the fake
# model in this process (it builds in minutes, without libtorch): labels in,
# decide at L0, fit and promote an L1 calibration, decide again at L1. Then
# mesa-anyjevd on its fake model (built meanwhile): the same loop through
# the daemon with an L2 head, annotate before and after, the bench table,
# and a graceful stop (SIGTERM: drain, exit 0).
#
# Every store lives under a temporary HOME, so the demo leaves nothing
# behind and the commands shown are exactly the README's.
set -euo pipefail
BUILD_DIR="${1:-build}"
JOBS="${2:-$(nproc)}"
DAEMON="$BUILD_DIR/server/mesa-anyjevd"
CLI="$BUILD_DIR/client/mesa-anyjev"
WORK="$(mktemp -d)"
PID=""
BUILD_PID=""
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
  [ -n "$BUILD_PID" ] && kill "$BUILD_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export HOME="$WORK/home" XDG_STATE_HOME="$WORK/home/.local/state"
mkdir -p "$HOME"
unset STATE_DIRECTORY

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
say() { printf '\n\033[1;34m== %s\033[0m\n' "$*"; }
mesa-anyjev() { "$CLI" "$@"; }

say "building the CLI ($CLI)"
cmake --build "$BUILD_DIR" -j "$JOBS" --target mesa-anyjev | tail -n 1
say "building mesa-anyjevd in the background (log: $WORK/daemon-build.log)"
cmake --build "$BUILD_DIR" -j "$JOBS" --target mesa-anyjevd \
  >"$WORK/daemon-build.log" 2>&1 &
BUILD_PID=$!

say "the learning loop on the fake model, in this process (--backend fake, the default)"
CARD=data/cards/DP1.10022.001.bet_sorting.md
CANDIDATES=data/candidates/DP1.10022.001.bet_sorting.json
STATE="Column 'bet_count': number of ground beetles per trap, by species"
step "mesa-anyjev --version"
mesa-anyjev --version
step "mesa-anyjev questions show term.fits"
mesa-anyjev questions show term.fits
step "mesa-anyjev learn ingest --labels data/bench/labels.jsonl"
mesa-anyjev learn ingest --labels data/bench/labels.jsonl
step "mesa-anyjev decide --question term.fits --state \"$STATE\"   # nothing promoted: L0"
mesa-anyjev decide --question term.fits --state "$STATE"
step "mesa-anyjev learn fit --question term.fits --level L1"
mesa-anyjev learn fit --question term.fits --level L1
step "mesa-anyjev learn promote --version 1 --question term.fits"
mesa-anyjev learn promote --version 1 --question term.fits
step "mesa-anyjev decide --question term.fits --state \"$STATE\"   # now L1"
mesa-anyjev decide --question term.fits --state "$STATE"
step "mesa-anyjev bundles list"
mesa-anyjev bundles list

say "waiting for the mesa-anyjevd build"
if ! wait "$BUILD_PID"; then
  BUILD_PID=""
  tail -n 30 "$WORK/daemon-build.log"
  exit 1
fi
BUILD_PID=""
tail -n 1 "$WORK/daemon-build.log"

say "the same loop through the daemon (--backend hf), an L2 head this time"
step "mesa-anyjevd --model fake --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 &"
"$DAEMON" --model fake --listen 127.0.0.1:0 --port-file "$WORK/port" \
  --metrics-listen 127.0.0.1:0 --set server.metrics_port_file="$WORK/metrics-port" \
  2> >(sed 's/^/  [daemon] /' >&2) &
PID=$!
for _ in $(seq 1 600); do [ -s "$WORK/port" ] && [ -s "$WORK/metrics-port" ] && break; sleep 0.1; done
ADDRESS="127.0.0.1:$(cat "$WORK/port")"
for _ in $(seq 1 600); do mesa-anyjev health --address "$ADDRESS" >/dev/null 2>&1 && break; sleep 0.1; done
HF=(--backend hf --address "$ADDRESS")
levels() {  # decisions of a run record by question and level
  python3 -c 'import collections, json, sys
run = json.load(open(sys.argv[1]))
counts = collections.Counter((d["question_id"], d["level"]) for d in run["decisions"])
for (q, level), n in sorted(counts.items()):
    print(f"    {q:26s} {level:5s} {n}")' "$1"
}
step "mesa-anyjev health --address $ADDRESS"
mesa-anyjev health --address "$ADDRESS"
step "mesa-anyjev info --address $ADDRESS"
mesa-anyjev info --address "$ADDRESS"
step "mesa-anyjev annotate --backend hf --address $ADDRESS --card $CARD --candidates $CANDIDATES --json   # levels served:"
mesa-anyjev annotate "${HF[@]}" --card "$CARD" --candidates "$CANDIDATES" --json >"$WORK/run1.json"
levels "$WORK/run1.json"
step "mesa-anyjev learn fit --backend hf --address $ADDRESS --question column.aspect --level L2"
mesa-anyjev learn fit "${HF[@]}" --question column.aspect --level L2
step "mesa-anyjev learn promote --version 1 --question column.aspect --backend hf --address $ADDRESS"
mesa-anyjev learn promote --version 1 --question column.aspect "${HF[@]}"
step "mesa-anyjev annotate --backend hf --address $ADDRESS --card $CARD --candidates $CANDIDATES --json   # again"
mesa-anyjev annotate "${HF[@]}" --card "$CARD" --candidates "$CANDIDATES" --json >"$WORK/run2.json"
levels "$WORK/run2.json"
step "mesa-anyjev bundles list --backend hf --address $ADDRESS"
mesa-anyjev bundles list "${HF[@]}"
step "curl -s http://127.0.0.1:$(cat "$WORK/metrics-port")/metrics | grep -E '^mesa_anyjev_(decisions_total|bundle_version)'"
curl -s "http://127.0.0.1:$(cat "$WORK/metrics-port")/metrics" |
  grep -E '^mesa_anyjev_(decisions_total|bundle_version)' | grep -v ' 0$' || true
step "mesa-anyjev bench run --levels raw,L0,L2 --out \$WORK/bench --date 2026-01-02"
mesa-anyjev bench run --levels raw,L0,L2 --out "$WORK/bench" --date 2026-01-02 >/dev/null
mesa-anyjev bench table --results "$WORK/bench/2026-01-02/fake.fake.json"

step "kill -TERM $PID   # graceful drain"
kill -TERM "$PID"
set +e
wait "$PID"
CODE=$?
set -e
PID=""
echo "mesa-anyjevd exited with code $CODE"
[ "$CODE" -eq 0 ]
