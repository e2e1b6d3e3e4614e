#!/usr/bin/env bash
# make lint: formatting (clang-format, Google style) and the layering rules of
# architecture.md, checked on the project's own sources.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

mapfile -t sources < <(git ls-files '*.h' '*.cc' '*.h.in')
if ! clang-format --dry-run -Werror "${sources[@]}" 2>/tmp/mesa-anyjev-format.log; then
  echo "lint: files need clang-format (run 'make format'):"
  grep -oE '^[^:]+\.(h|cc|h\.in)' /tmp/mesa-anyjev-format.log | sort -u | sed 's/^/  /'
  status=1
fi

# forbid DIR REGEX WHY: no file under DIR may include a header matching REGEX.
forbid() {
  local dir=$1 pattern=$2 why=$3 hits
  hits=$(git grep -nE "^#include [<\"]($pattern)" -- "$dir" || true)
  if [ -n "$hits" ]; then
    echo "lint: $why"
    echo "$hits" | sed 's/^/  /'
    status=1
  fi
}
forbid common 'torch/|ATen/|c10/|grpc|google/protobuf|mesa/anyjev/v1/' \
  "common/ includes neither libtorch nor gRPC/protobuf"
forbid common 'client/|server/' "common/ depends on neither the client nor the server"
forbid server/model 'grpc|google/protobuf|mesa/anyjev/v1/|server/(engine|service|daemon)/' \
  "server/model sees no gRPC/protobuf and depends on nothing above it"
forbid server/engine 'grpc|google/protobuf|mesa/anyjev/v1/|server/(service|daemon)/' \
  "server/engine sees no gRPC/protobuf and depends on nothing above it"
forbid server/service 'torch/|ATen/|c10/' "server/service never includes libtorch"
forbid client 'torch/|ATen/|c10/|server/' "client/ depends on common/ only"
forbid client/commands 'grpc|google/protobuf|mesa/anyjev/v1/' \
  "only client/backends/ sees protobuf types"

[ "$status" -eq 0 ] && echo "lint: ok (${#sources[@]} files formatted, layering respected)"
exit "$status"
