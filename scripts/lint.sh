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
# One seam for CUDA (server/model/cuda/cuda_calls.h): only its CUDA side
# includes CUDA's, c10_cuda's or ATen/cuda's headers (the kernels' .cu files
# are not C++ sources here); the CPU-only link of the daemon proves the
# same for calls (docs/build.md).
hits=$(git grep -nE '^#include [<"](c10/cuda/|ATen/cuda/|cuda_runtime|cuda\.h|cuda_bf16|cuda_fp16|cublas|cusparse|cusolver)' \
  -- '*.h' '*.cc' ':!server/model/cuda/cuda_calls.cc' ':!tests/build_checks/*' || true)
if [ -n "$hits" ]; then
  echo "lint: CUDA headers outside the CUDA seam (server/model/cuda/cuda_calls.cc):"
  echo "$hits" | sed 's/^/  /'
  status=1
fi
forbid client 'torch/|ATen/|c10/|server/' "client/ depends on common/ only"
forbid client/commands 'grpc|google/protobuf|mesa/anyjev/v1/' \
  "only client/backends/ sees protobuf types"

# The repository stands alone: no comment, doc or test may cite a document it
# does not hold (the design notes under shared/spec, their file names, their
# section numbers, or the reference's decision and amendment ids such as
# "(A1, D3)"). Say the why in a sentence, or point to docs/*.md. Checked over
# tracked and untracked (not ignored) files, so a new file counts before it is
# added. To see it fail: append "// as decision-method.md 5.3 says (A5)" to any
# .cc file, run make lint (it names file:line), then remove the line.
spec_docs='decision-method|reference-system|performance-anchors|reliability-anchors'
spec_docs+='|(engine-v2|gpu-engine|toolchain|platform|style)\.md'
cite_id='[ABCDR][1-9][0-9]?[a-z]?'
citation="shared/spec|\b($spec_docs)|§ ?[0-9]|\b[Ss]ections? [0-9]"
citation+="|\bspec(ification)?('s)? [0-9]"
citation+="|\([^()]*[ ,;/(]$cite_id([,;:/ )]|$)|\($cite_id([,;:/ )]|$)"
citation+="|\b(amendment|DESIGN|reference'?s?) $cite_id\b|(//|#) $cite_id\b"
# Messages the CLI prints byte for byte as the reference does (the ids in them
# are explained in docs/reference.md), so they are not citations here.
reference_messages='per class \(A2\)|has none \(D11\)|D6 bootstrap|DESIGN D7(/D24)?'
# This script names the patterns; data/ and the fixtures are inputs (NEON
# cards say "domain D13"), not prose.
citation_skip=(':!scripts/lint.sh' ':!data/cards' ':!data/bench/cards' ':!*.json')
hits=$(git grep --untracked -nIE "$citation" -- . "${citation_skip[@]}" |
  sed -E "s#$reference_messages##g" | grep -E "^[^:]+:[0-9]+:.*($citation)" || true)
if [ -n "$hits" ]; then
  echo "lint: a citation of a document outside the repository (say the why, or" \
    "point to docs/*.md):"
  echo "$hits" | cut -c1-160 | sed 's/^/  /'
  status=1
fi

[ "$status" -eq 0 ] && echo "lint: ok (${#sources[@]} files formatted, layering respected," \
  "no outside citations)"
exit "$status"
