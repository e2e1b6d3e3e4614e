"""A pass's anatomy on the CPU (qwen3_dump's "profile" request,
tests/tools/pass_anatomy.h): one call of fresh prompts under libtorch's
profiler, every operator given to the stage the forward had open. The GPU
check runs the same request on CUDA for a pass of about 8k new tokens and one
of 64; this test keeps the table's structure and its arithmetic from rotting
where no GPU is. Also the tool's --set overrides (the GPU check's variants)
and the honest prefill timing (fresh ids, nothing reused)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

DUMP = os.environ.get("MESA_ANYJEV_QWEN3_DUMP", "build/tests/qwen3_dump")
LAYERS = 3
# What every Qwen3 pass runs on the CPU in float32 (q/k norms and the rotary
# embedding are one fused stage there, server/model/row_norm.h).
EVERY_PASS = {"embedding", "rotary_tables", "input_norm", "qkv_proj", "qk_norm_rotary",
              "kv_write", "attention", "o_proj", "residual_add", "post_norm", "gate_up_proj",
              "activation", "down_proj", "gather_outputs", "final_norm", "lm_head",
              "log_softmax", "plan", "inputs_to_device", "outputs_to_host"}
ROW_KEYS = {"stage", "count", "ms", "host_ms", "per_layer"}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make(tmp_path_factory.mktemp("anatomy") / "tiny-qwen3", layers=LAYERS, heads=4,
                kv_heads=2)


def dump(checkpoint, request, *args):
    out = subprocess.run([DUMP, str(checkpoint), "float32", *args], input=json.dumps(request),
                         capture_output=True, text=True, timeout=600)
    return out


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_the_stages_account_for_the_pass(checkpoint, attention):
    out = dump(checkpoint, {"profile": {"tokens": 96, "batch": 4}, "threads": 1}, attention)
    assert out.returncode == 0, out.stderr
    anatomy = json.loads(out.stdout)
    assert (anatomy["unit"], anatomy["tokens"], anatomy["layers"], anatomy["passes"]) == \
        ("operators", 384, LAYERS, 1)
    rows = {r["stage"]: r for r in anatomy["rows"]}
    assert all(set(r) == ROW_KEYS for r in anatomy["rows"])
    missing = EVERY_PASS - set(rows)
    assert not missing, missing
    # Planning is host work without operators (the plan is plain C++ until
    # its one upload), and the CPU skips the copy to the host.
    for name in EVERY_PASS - {"outputs_to_host", "plan"}:
        assert rows[name]["count"] > 0, name
    assert rows["plan"]["host_ms"] > 0
    # The rows are the profiled span, cut by stage; the span lies inside the
    # call's wall time measured beside the profiler (how much of the wall it
    # covers is a timing, which a loaded host moves: 11.8 of 15.4 ms once
    # while a build ran, so it is not asserted).
    assert anatomy["sum_ms"] == pytest.approx(sum(r["ms"] for r in anatomy["rows"]), rel=1e-9)
    assert anatomy["sum_ms"] == pytest.approx(anatomy["span_ms"], rel=1e-6)
    assert 0 < anatomy["span_ms"] <= anatomy["wall_ms"] + 0.5  # 0.5 ms: two clocks
    # Nearly all of it inside a named stage.
    unstaged = rows.get("unstaged host work", {"ms": 0.0})["ms"]
    assert unstaged < 0.05 * anatomy["span_ms"], anatomy
    assert all(r["ms"] >= 0 and r["count"] >= 0 for r in anatomy["rows"])
    per_layer = [r for r in anatomy["rows"] if r["per_layer"]]
    assert anatomy["per_layer"]["count"] == pytest.approx(
        sum(r["count"] for r in per_layer) / LAYERS)
    assert 10 < anatomy["per_layer"]["count"] < 200, anatomy["per_layer"]
    # Each of the four GEMMs is one operator a layer, plus its reshapes.
    for gemm in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        assert LAYERS <= rows[gemm]["count"], rows[gemm]


def test_prefill_timing_uses_fresh_ids_and_says_what_was_cached(checkpoint):
    out = dump(checkpoint, {"time_prefill": {"shapes": [{"tokens": 64, "batch": 1},
                                                        {"tokens": 32, "batch": 8}],
                                             "repeat": 3}, "threads": 1}, "sdpa")
    assert out.returncode == 0, out.stderr
    shapes = json.loads(out.stdout)["shapes"]
    assert [(s["tokens"], s["batch"]) for s in shapes] == [(64, 1), (32, 8)]
    for s in shapes:
        assert s["reused_tokens"] == 0 and s["passes_per_call"] == 1, s
        assert s["tokens_run"] == 3 * s["tokens"] * s["batch"], s
        assert len(s["seconds"]) == 3 and s["tokens_per_second"] > 0


def test_settings_reach_the_tool_through_the_daemons_loader(checkpoint):
    request = {"prompts": [[5, 6, 7]], "label_ids": [1]}
    eager = dump(checkpoint, request, "eager")
    sdpa = dump(checkpoint, request, "eager", "--set", "model.attention=sdpa")
    assert eager.returncode == 0 and sdpa.returncode == 0, (eager.stderr, sdpa.stderr)
    lp = lambda o: json.loads(o.stdout)["label_logprobs"][0][0]  # noqa: E731
    assert lp(sdpa) == pytest.approx(lp(eager), abs=1e-4)
    # A setting that never reached the engine would pass unseen: passes of
    # 2 tokens cannot hold the 3-token prompt: two passes.
    small = dump(checkpoint, {"calls": [request]}, "eager", "--set", "engine.batch_tokens=2")
    assert small.returncode == 0, small.stderr
    assert json.loads(small.stdout)["passes"] == 2
    for bad, why in ((["--set", "model.no_such_key=1"], "model.no_such_key"),
                     (["--set", "engine.batch_tokens=x"], "engine.batch_tokens"),
                     (["--set"], "--set needs section.field=value")):
        out = dump(checkpoint, request, "eager", *bad)
        assert out.returncode == 2 and why in out.stderr, out.stderr
