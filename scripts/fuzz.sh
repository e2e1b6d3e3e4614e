#!/usr/bin/env bash
# Runs every libFuzzer target built in DIR for SECONDS each, one after the
# other (a 2-core machine: one fuzzer at a time), starting from the seed
# corpus and keeping what it finds in DIR/corpus/<target>. Prints a table:
# target, seconds, executions, corpus units, crashes. A crash's input is in
# DIR/crashes/<target>-*; copy it into tests/fuzz/corpus/<target>/ with the
# fix so CI replays it from then on.
set -euo pipefail
DIR="${1:-build-fuzz}"
SECONDS_EACH="${2:-300}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SEEDS="$HERE/tests/fuzz/corpus"
mkdir -p "$DIR/corpus" "$DIR/crashes" "$DIR/logs"
printf '| target | seconds | executions | corpus | crashes |\n|---|---:|---:|---:|---:|\n'
status=0
for seeds in "$SEEDS"/*/; do
  target="$(basename "$seeds")"
  binary="$DIR/tests/fuzz/fuzz_$target"
  [ -x "$binary" ] || { echo "missing $binary" >&2; exit 2; }
  mkdir -p "$DIR/corpus/$target"
  log="$DIR/logs/$target.log"
  # -rss_limit_mb: ASan's shadow plus a model-sized input must not be
  # mistaken for a leak; -timeout: one input may take 10 s at most.
  if ! "$binary" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
      -timeout=10 -rss_limit_mb=4096 -max_len=1048576 \
      -artifact_prefix="$DIR/crashes/$target-" \
      "$DIR/corpus/$target" "$seeds" >"$log" 2>&1; then
    status=1
  fi
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)"
  units="$(find "$DIR/corpus/$target" -type f | wc -l)"
  crashes="$(find "$DIR/crashes" -name "$target-*" -type f | wc -l)"
  printf '| %s | %s | %s | %s | %s |\n' "$target" "$SECONDS_EACH" "$execs" "$units" "$crashes"
done
exit "$status"
