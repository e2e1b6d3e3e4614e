# mesa-anyjev: every target installs what is missing first (scripts/install.sh
# is idempotent: seconds when nothing is missing).
VENV      ?= /opt/mesa-anyjev/venv
BUILD_DIR ?= build
PYTHON    := $(VENV)/bin/python
JOBS      ?= $(shell nproc)
CMAKE_BUILD_TYPE ?= Release

.PHONY: all install install-core configure build test test-asan demo where lint format clean

all: build

install:
	@bash scripts/install.sh

# What configuring, building and the demo need (no vLLM, no LiteLLM).
install-core:
	@bash scripts/install.sh --core

$(BUILD_DIR)/build.ninja: | install-core
	@TORCH_PREFIX=$$($(PYTHON) -c 'import torch; print(torch.utils.cmake_prefix_path)') && \
	cmake -S . -B $(BUILD_DIR) -G Ninja \
	  -DCMAKE_BUILD_TYPE=$(CMAKE_BUILD_TYPE) \
	  -DCMAKE_PREFIX_PATH="$$TORCH_PREFIX" \
	  -DMESA_ANYJEV_PYTHON=$(PYTHON) $(CMAKE_ARGS)

configure: install-core $(BUILD_DIR)/build.ninja

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: install build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The same code under ASan and UBSan (gcc) in $(ASAN_DIR): the unit tests,
# the fuzz seed replays, the end-to-end suites on the fake model that take
# hostile input, and one tiny-Qwen3 suite (docs/reliability.md says what
# runs and why). Leak checks are off: gRPC and libtorch keep static state
# alive at exit by design; growth is what the soak test measures. -O1 -g1
# (line tables: reports keep file:line) takes about 40% less compile time
# than RelWithDebInfo's -O2 -g (docs/build.md); only what the suites run
# is built.
ASAN_DIR   ?= build-asan
ASAN_TESTS ?= ^(unit:|fuzz replay: |e2e: test_(errors|hardening|decisions|inference|lifecycle|bundles_served|metrics|qwen3_served|reflection)$$)
FUZZ_REPLAYS := $(addprefix fuzz_,$(addsuffix _replay,strict_json rpc_requests artifacts safetensors tokenizer_json tokenizer_text config_yaml tokens_file labels gateway_response))
test-asan: install
	@TORCH_PREFIX=$$($(PYTHON) -c 'import torch; print(torch.utils.cmake_prefix_path)') && \
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
	  -DCMAKE_PREFIX_PATH="$$TORCH_PREFIX" \
	  -DMESA_ANYJEV_PYTHON=$(PYTHON) -DMESA_ANYJEV_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_DIR) -j $(JOBS) --target unit_tests mesa-anyjevd \
	  mesa-anyjev bundle_writer $(FUZZ_REPLAYS)
	@cd $(ASAN_DIR) && \
	  ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0:allocator_may_return_null=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -R '$(ASAN_TESTS)'

# Builds only what it runs, the CLI first (no libtorch: minutes) and the
# daemon while the first half shows; not the test suite.
demo: configure
	@bash scripts/demo.sh $(BUILD_DIR) $(JOBS)

where:
	@echo "build directory: $(abspath $(BUILD_DIR))"
	@echo "python:          $(PYTHON)"
	@echo "libtorch:        $$($(PYTHON) -c 'import torch; print(torch.__version__, torch.utils.cmake_prefix_path)' 2>/dev/null || echo 'not installed: run make install')"
	@echo "daemon:          $(abspath $(BUILD_DIR))/server/mesa-anyjevd"
	@echo "cli:             $(abspath $(BUILD_DIR))/client/mesa-anyjev"

lint: install
	@bash scripts/lint.sh

format:
	@git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)

# Not a test: our tokenizer against Hugging Face tokenizers on one thread,
# same corpora, same run (docs/benchmarks.md records the figures).
.PHONY: bench-tokenizer
bench-tokenizer: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target tokenizer_bench mesa-anyjev
	@$(PYTHON) bench/bench_tokenizer.py --bench $(BUILD_DIR)/bench/tokenizer_bench \
	  --cli $(BUILD_DIR)/client/mesa-anyjev

# Our engine against transformers, side by side in one run on a generated
# small Qwen3 (float32, same threads); prints ratios (docs/benchmarks.md).
.PHONY: bench-engine
bench-engine: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target qwen3_dump mesa-anyjevd
	@$(PYTHON) bench/bench_engine.py --dump $(BUILD_DIR)/tests/qwen3_dump $(BENCH_ARGS)

# bench-engine's rows for this tree and another build (BEFORE=its build
# directory, e.g. a worktree at the commit before a change), side by side in
# one run, rounds alternating (docs/benchmarks.md).
.PHONY: bench-before-after
bench-before-after: configure
	@test -n "$(BEFORE)" || { echo "BEFORE=<the other tree's build directory> is required"; exit 2; }
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target qwen3_dump mesa-anyjevd
	@$(PYTHON) bench/bench_before_after.py --before $(BEFORE) --after $(BUILD_DIR) $(BENCH_ARGS)

# The annotation workload through the daemon against the same prompts through
# vLLM's CPU build (scripts/install.sh's vLLM environment), one run, same
# checkpoint, threads, KV bytes and tokens a pass (docs/benchmarks.md).
.PHONY: bench-gateway
bench-gateway: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target mesa-anyjevd
	@MESA_ANYJEVD=$(BUILD_DIR)/server/mesa-anyjevd $(PYTHON) bench/bench_gateway.py $(BENCH_ARGS)

# A dataset-scale run through the Python client's decide_stream and the
# CLI's decide --out against the same work sent as ideal full calls at once,
# side by side in one run on the bench model: decisions/s and the passes'
# fill (docs/benchmarks.md).
.PHONY: bench-pipeline
bench-pipeline: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target mesa-anyjevd mesa-anyjev
	@MESA_ANYJEVD=$(BUILD_DIR)/server/mesa-anyjevd MESA_ANYJEV_CLI=$(BUILD_DIR)/client/mesa-anyjev \
	  $(PYTHON) bench/bench_pipeline.py $(BENCH_ARGS)

# Two pipelines (8 and 2 calls in flight) and a curator on one daemon, under
# engine.scheduler fifo, fair with equal weights and fair at 3:1, each on a
# fresh daemon, one run: the curator's latency beside its bound, each
# pipeline's tokens, decisions/s against FIFO (docs/benchmarks.md).
.PHONY: bench-scheduler
bench-scheduler: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target mesa-anyjevd mesa-anyjev
	@MESA_ANYJEVD=$(BUILD_DIR)/server/mesa-anyjevd MESA_ANYJEV_CLI=$(BUILD_DIR)/client/mesa-anyjev \
	  $(PYTHON) bench/bench_scheduler.py $(BENCH_ARGS)

# Not in CI: the reliability plan's long runs (tests/stress: sustained load,
# overload, a 16-call drain, a 10-minute soak, memcheck, connection abuse,
# 200 SIGKILLs during promote) against
# the real daemon on the fake model; figures to $(BUILD_DIR)/stress/results.json
# (docs/reliability.md). STRESS_SECONDS, STRESS_SOAK_SECONDS, ... shorten it.
.PHONY: stress
stress: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target mesa-anyjevd load_client bundle_writer
	@MESA_ANYJEVD=$(BUILD_DIR)/server/mesa-anyjevd MESA_ANYJEV_LOAD_CLIENT=$(BUILD_DIR)/tests/load_client \
	  STRESS_OUT=$(BUILD_DIR)/stress/results.json \
	  $(PYTHON) -m pytest -q -p no:cacheprovider -s tests/stress/test_stress.py
	@MESA_ANYJEV_BUNDLE_WRITER=$(BUILD_DIR)/tests/bundle_writer MESA_ANYJEV_BUNDLE_KILLS=200 \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/e2e/test_bundles_crash.py

# Not in CI: each libFuzzer target for FUZZ_SECONDS (300) under ASan and
# UBSan, built with clang in $(FUZZ_DIR); prints executions and findings per
# target (docs/reliability.md). CI replays the seed corpora instead.
FUZZ_DIR     ?= build-fuzz
FUZZ_SECONDS ?= 300
.PHONY: fuzz
fuzz: install
	@CC=clang CXX=clang++ cmake -S . -B $(FUZZ_DIR) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESA_ANYJEV_FUZZ=ON \
	  -DMESA_ANYJEV_WITH_TORCH=OFF -DMESA_ANYJEV_WERROR=OFF >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target mesa_anyjev_fuzz
	@bash scripts/fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# The GPU check for the GPU test host (issue 28; docs/benchmarks.md): the
# daemon and qwen3_dump for CUDA against that host's torch (2.11.0+cu130, in
# its own environment from scripts/install.sh --gpu-bundle), the libraries
# and wheels the host lacks, one file of at most 45 MiB in $(GPU_BUNDLE_DIR)
# to send with tests/gpu/run.sh. gpu-rehearsal runs the check from that file
# without a GPU in an environment made to look like the host.
GPU_BUILD_DIR  ?= build-gpu
GPU_BUNDLE_DIR ?= build-gpu-bundle
.PHONY: install-gpu-bundle gpu-bundle gpu-rehearsal
install-gpu-bundle:
	@bash scripts/install.sh --gpu-bundle

gpu-bundle: install-gpu-bundle
	@bash scripts/gpu_bundle.sh $(GPU_BUILD_DIR) $(GPU_BUNDLE_DIR)/mesa-anyjev-gpu.tar.xz

gpu-rehearsal: gpu-bundle
	@bash tests/gpu/rehearsal.sh $(GPU_BUNDLE_DIR)/mesa-anyjev-gpu.tar.xz

# The GB10's architecture checked here (issue 26; docs/build.md, "aarch64"):
# the daemon, the CLI and the unit tests cross-compiled for linux/arm64 into
# $(ARM64_BUILD_DIR), the unit tests under qemu-user, and the aarch64 daemon
# against $(BUILD_DIR)'s on one tiny Qwen3. Not in CI (docs/build.md says
# why): run it after a change to CMake, the install or a CPU-specific path.
# CUDA=1: the daemon as the GB10 builds it, linked against libtorch_cuda of
# the aarch64 wheels (GBs) with the kernels cross-compiled for sm_120, into
# build-arm64-cuda (docs/build.md, "The GB10's CUDA build, linked here").
CUDA ?= 0
ifeq ($(CUDA),1)
ARM64_BUILD_DIR ?= build-arm64-cuda
ARM64_INSTALL := --arm64-cuda
else
ARM64_BUILD_DIR ?= build-arm64
ARM64_INSTALL := --arm64
endif
.PHONY: install-arm64 check-arm64
install-arm64:
	@bash scripts/install.sh $(ARM64_INSTALL)

check-arm64: install-arm64
	@$(MAKE) --no-print-directory build
	@CUDA=$(CUDA) bash scripts/check_arm64.sh $(ARM64_BUILD_DIR) $(BUILD_DIR) $(JOBS)

# The container image (deploy/container/Containerfile; docs/build.md), with
# podman as the build machines run it (docs/build.md: runc, a base from
# debootstrap; IMAGE_SUITE=trixie for Debian 13; overlay storage where the
# kernel mounts it, else vfs: deploy/container/podman.sh). `image` compiles inside
# the image (the torch wheel and a full build: long); `image-prebuilt` packs
# this host's $(BUILD_DIR) into the runtime stage alone (a Debian 12 host for
# the bookworm base). On the GB10: docker build, docs/operations.md.
VERSION     := $(shell sed -n 's/^project.mesa_anyjev VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
IMAGE       ?= mesa-anyjevd:$(VERSION)
IMAGE_SUITE ?= bookworm
# pip in the build stage trusts what pip here trusts (PIP_CERT: a proxy's CA).
IMAGE_CA    ?= $(PIP_CERT)
PODMAN_BUILD = deploy/container/podman.sh build --format docker --network host \
  -f deploy/container/Containerfile -t $(IMAGE) \
  $(if $(IMAGE_CA),-v $(IMAGE_CA):/run/build-ca.crt:ro --build-arg PIP_CERT=/run/build-ca.crt)
# What the build stage compiles (every file git would commit), hashed: its
# SOURCE_ID, so podman's layer cache misses when a source changed.
SOURCE_ID = $(shell git ls-files -z -co --exclude-standard | xargs -0 sha256sum 2>/dev/null | sha256sum | cut -c1-16)
.PHONY: image image-prebuilt
image: install
	@base=$$(bash deploy/container/base.sh $(IMAGE_SUITE)) && \
	  $(PODMAN_BUILD) --build-arg BASE=$$base --build-arg BINARIES=build \
	  --build-arg SOURCE_ID=$(SOURCE_ID) .

# The image test (tests/e2e/test_container_image.py) on the image `make image`
# built ($(IMAGE)) rather than one packed from $(BUILD_DIR)'s binaries.
.PHONY: test-image
test-image: build
	@MESA_ANYJEV_E2E_IMAGE=$(IMAGE) $(PYTHON) -m pytest -q -p no:cacheprovider \
	  tests/e2e/test_container_image.py

# The runtime stage alone from $(BUILD_DIR), one commit (--layers=false);
# it says first if the disk cannot hold that commit (about 15 GB).
image-prebuilt: install build
	@bash deploy/container/prebuilt.sh $(BUILD_DIR) $(IMAGE) $(IMAGE_SUITE)
