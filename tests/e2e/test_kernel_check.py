"""tests/tools/kernel_check on the CPU: the GPU check's kernel parity and
timing tool, whose fused path falls back to the ATen one here. Its report
has every kernel at every shape with the bound held, it fails (exit 1) when
one output is spoiled, naming only that kernel, and it refuses bad flags
(exit 2). On a GPU the same code compares our CUDA kernels instead."""
import json
import os
import subprocess

import pytest

TOOL = os.environ.get("MESA_ANYJEV_KERNEL_CHECK", "build/tests/kernel_check")
KERNELS = ("add_rms_norm", "qk_norm_rope", "silu_mul")
QUICK = ["--repeats", "2", "--warmup", "1"]


def run(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=300)


def test_report_holds_every_kernel_within_its_bound():
    r = run(*QUICK, "--tokens", "16,33")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] and report["device"] == "cpu" and report["dtype"] == "BFloat16"
    # Asked for all of ours; on the CPU none runs, and it says so.
    assert report["kernels"] == "aten"
    assert "our kernels are CUDA only, so the ATen path runs" in r.stderr
    cases = {(x["kernel"], x["shape"], x["tokens"]) for x in report["results"]}
    assert cases == {(k, s, n) for k in KERNELS
                     for s, n in (("qwen3-8b", 16), ("qwen3-8b", 33), ("tiny", 7))}
    for result in report["results"]:
        assert result["ok"] and result["path"] == "aten"
        for name, out in result["outputs"].items():
            assert out["ok"], (result["kernel"], name)
            if "elements" in out:
                assert out["nan"] == 0 and out["elements"] > 0
                assert out["worst_vs_bound"] <= 1
        if result["shape"] == "qwen3-8b":
            bench = result["bench"]
            assert bench["bytes"] > 0 and bench["ms"]["min"] <= bench["ms"]["median"]
            assert bench["gb_per_s"] > 0 and bench["speedup_vs_aten"] > 0
        else:
            assert "bench" not in result
    pool = next(x for x in report["results"] if x["kernel"] == "qk_norm_rope")["outputs"]
    assert pool["keys_elsewhere"]["rows"] > 0 and pool["keys_elsewhere"]["not_nan"] == 0


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_spoiled_output_fails_that_kernel_only(kernel):
    r = run(*QUICK, "--tokens", "16", "--no-bench", "--inject-error", kernel)
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert not report["ok"]
    for result in report["results"]:
        assert result["ok"] == (result["kernel"] != kernel), result
    failed = next(x for x in report["results"] if x["kernel"] == kernel)
    worst = max(o.get("worst_vs_bound", 0) for o in failed["outputs"].values())
    assert worst > 1


@pytest.mark.parametrize("args,names", [
    (["--kernels", "silu"], "--kernels: 'silu' in 'silu' is not a kernel"),
    (["--device", "gpu"], "--device: \"gpu\" is not cpu, cuda or cuda:N"),
    (["--dtype", "int8"], "--dtype"),
    (["--tokens", "0"], "--tokens"),
])
def test_bad_flags_exit_2_naming_the_flag(args, names):
    r = run(*args)
    assert r.returncode == 2 and names in r.stderr, r.stderr
