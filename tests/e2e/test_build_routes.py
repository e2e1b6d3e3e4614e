"""The checks `make test` makes of the routes CI does not run (docs/build.md,
"What CI checks of the routes it does not run"), each shown failing on the
break it guards:

- the units that include a CUDA header compile with the include folders
  of the image's build stage alone (scripts/check_cuda_includes.py), and
  fail without torch's nvidia headers, as `make image` did before them
  (`cusparse.h: No such file`, found here only in the host's toolkit);
- the daemon links a second time against the CPU libraries alone
  (mesa-anyjevd-cpu-only, part of `make build`), serves a tiny Qwen3 as
  the CUDA build does, and the same link with one call into CUDA outside
  the seam fails;
- the fuzz targets' units compile with clang (scripts/check_clang.py), and
  a clang-only error fails the check;
- the pinned wheel sets resolve for their platforms
  (scripts/check_wheel_sets.py), and a pin with no aarch64 wheel fails it.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

from conftest import DAEMON, pb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MESA_ANYJEV_BUILD_DIR", Path(DAEMON).resolve().parents[1]))
CPU_ONLY = BUILD / "server" / "mesa-anyjevd-cpu-only"
PROBES = ROOT / "tests" / "build_checks"


def run(*args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


def cuda_build():
    return CPU_ONLY.exists()


@pytest.mark.skipif(not cuda_build(), reason="a build without CUDA has no CUDA units")
def test_cuda_units_need_torchs_headers_not_the_hosts():
    ok = run(sys.executable, ROOT / "scripts" / "check_cuda_includes.py", BUILD)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "cuda_calls.cc: compiles with the image's folders" in ok.stdout
    # The break: the seam's unit without torch's nvidia include folders
    # finds cuBLAS's and cuSPARSE's headers nowhere once the host's are
    # hidden, as in the image before this check.
    broken = run(sys.executable, ROOT / "scripts" / "check_cuda_includes.py", BUILD,
                 "--drop-include", "site-packages/nvidia")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "FAILED server/model/cuda/cuda_calls.cc" in broken.stdout
    assert "No such file or directory" in broken.stdout


@pytest.mark.skipif(not cuda_build(), reason="the CPU-only link is a CUDA build's second link")
def test_the_cpu_only_daemon_links_without_libtorch_cuda_and_serves(start_daemon, tmp_path):
    needed = run("ldd", CPU_ONLY).stdout
    assert "libtorch_cpu.so" in needed
    for library in ("libtorch_cuda.so", "libc10_cuda.so"):
        assert library not in needed, needed
    assert "libtorch_cuda.so" in run("ldd", DAEMON).stdout

    checkpoint = make(tmp_path / "tiny-qwen3", heads=4, kv_heads=2, tied=False)
    group = pb.PromptGroup(prefix=pb.Segment(text=b"State: a table.\nQuestion: which?\n"),
                           suffixes=[pb.Segment(text=b"A. one\nB. two\n"),
                                     pb.Segment(text=b"A. two\nB. one\n")],
                           label_ids=[32, 33])
    answers = []
    for binary in (DAEMON, CPU_ONLY):
        daemon = start_daemon("--model", str(checkpoint), binary=str(binary))
        reply = daemon.stub.Logprobs(pb.LogprobsRequest(groups=[group], top_k=3), timeout=60)
        answers.append([list(p.label_logprobs) + [t.id for t in p.top]
                        for p in reply.groups[0].prompts])
        daemon.stop()
    np.testing.assert_array_equal(np.array(answers[0]), np.array(answers[1]))

    # The break: the same link with one call into CUDA outside the seam.
    escaped = run("cmake", "--build", BUILD, "--target", "cuda_call_outside_seam")
    assert escaped.returncode != 0, escaped.stdout
    assert "undefined reference to `c10::cuda::device_count()" in escaped.stdout + escaped.stderr


def test_a_clang_only_error_fails_the_clang_check(tmp_path):
    broken = run(sys.executable, ROOT / "scripts" / "check_clang.py", ROOT,
                 BUILD / "clang-check", "--extra", PROBES / "structured_binding_capture.cc")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "FAILED tests/build_checks/structured_binding_capture.cc" in broken.stdout
    assert "reference to local binding 'key' declared in enclosing function" in broken.stdout


def test_a_pin_without_an_aarch64_wheel_fails_the_wheel_sets(tmp_path):
    reqs = tmp_path / "requirements.txt"
    # cuBLAS 11.10's wheels are x86_64 and Windows only.
    reqs.write_text("nvidia-cublas-cu11==11.10.3.66\n")
    broken = run(sys.executable, ROOT / "scripts" / "check_wheel_sets.py",
                 "--requirements", reqs, "--only", "Debian 12")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "image x86_64 (Debian 12, Python 3.11): " in broken.stdout
    assert "wheels resolve" in broken.stdout
    assert "image aarch64 (Debian 12, Python 3.11: the GB10): does not resolve" in broken.stdout
    assert "nvidia-cublas-cu11==11.10.3.66" in broken.stdout
