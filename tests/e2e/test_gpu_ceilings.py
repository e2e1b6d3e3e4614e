"""The GPU check's `ceilings` verdict (tests/gpu/ceilings.py) on the figures of
the H200 runs of 2026-12-04 (docs/gpu-results/): the old prefill section's
cached-tail figure, 92,161 tokens/s at 2,048 tokens, implies more FLOP/s than
the GEMM peak measured in the same run and must fail by name; the uncached
figures of the same runs, and a pass no shorter than its weight read, pass;
a pass shorter than reading its weights once fails. The verdict is enforced
only on the GPU (a shared CPU's speed figures mean nothing), so it is
checked here, where no GPU is needed."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "gpu"))
sys.path.insert(0, str(ROOT / "bench"))
import ceilings  # noqa: E402
from bench_engine import counted  # noqa: E402

RUN1 = json.loads((ROOT / "docs" / "gpu-results" / "2026-12-04-h200-run1.json").read_text())
PARAMS = RUN1["backbone_params"]  # 6.95 B
H200 = {"gemm_flops": RUN1["gemm_peak_tflops"] * 1e12, "copy_bytes_per_s": 4.3e12}


def report(*rows):
    return {"section": [{"measurement": name, "ours": None, "peer": None, "ratio": None,
                         "target": "-", "counted": {"ours": c}} for name, c in rows]}


def test_the_cached_tail_of_run1_is_refused_by_name():
    cached = next(r for r in RUN1["prefill"] if r["tokens"] == 2048)["ours_sdpa_tok_s"]
    assert cached > 90000
    verdict = ceilings.verdict(report(("prefill 2048", counted(2048 / cached, 2048))),
                               PARAMS, 2, H200)
    assert not verdict["ok"] and verdict["checked"] == 1
    (violation,) = verdict["violations"]
    assert violation.startswith("section[0]: prefill 2048 (ours): 2048 tokens in 22.22 ms imply ")
    assert "above the measured GEMM peak" in violation
    assert float(violation.split("imply ")[1].split(" TFLOP/s")[0]) > 1200


def test_the_uncached_figures_of_the_same_runs_stand():
    verdict = ceilings.verdict(report(
        ("prefill 2048, engine table", counted(2048 / 28909, 2048)),
        ("daemon pass of 8192", counted(8192 / 30535, 8192)),
        ("prefill 128", counted(128 / 8669, 128)),
        ("17 questions uncached", counted(0.456, 17 * 476, weight_reads=17)),
        ("L2 at 24/36", counted(0.0137, 424, depth=24 / 36))), PARAMS, 2, H200)
    assert verdict == {"ok": True, "checked": 5, "violations": [], "flop_slack": 1.1,
                       "byte_slack": 1.2}


def test_a_pass_shorter_than_its_weight_read_is_refused():
    # 13.9 GB of block weights at 4.3 TB/s: 3.2 ms; 64 tokens in 2.5 ms is
    # under the GEMM peak but cannot have read them, nor 17 passes 40 ms.
    verdict = ceilings.verdict(report(("pass of 64", counted(0.0025, 64)),
                                      ("17 passes in 40 ms", counted(0.04, 1692,
                                                                     weight_reads=17))),
                               PARAMS, 2, H200)
    assert not verdict["ok"] and len(verdict["violations"]) == 2
    assert all("shorter than reading the blocks' weights" in v for v in verdict["violations"])
    assert "2.50 ms is shorter than reading the blocks' weights 1 time(s)" in \
        verdict["violations"][0]


def test_without_ceilings_nothing_is_checked():
    verdict = ceilings.verdict(report(("x", counted(1.0, 1))), PARAMS, 2, None)
    assert verdict["ok"] and verdict["checked"] == 0 and "not measured" in verdict["note"]
