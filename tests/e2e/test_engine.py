"""The engine's exactness: packed passes of many prompt groups (a prefix
computed once in the pass of its suffixes, which attend to it at every
layer), the block prefix cache across calls (full, partial and missing hits,
a block boundary inside a prefix, a partial block copied from a cached one,
eviction under pressure), chunked prefixes,
early stop and token budgets all equal the plain one-prompt forward within
1e-5 in float32, on a tiny random Qwen3 (the daemon's own Qwen3Backend
through tests/tools/qwen3_dump). Every test runs with eager attention and
with sdpa."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

DUMP = os.environ.get("MESA_ANYJEV_QWEN3_DUMP", "build/tests/qwen3_dump")
LABELS = [32, 33, 34, 9454, 2753, 151935]
N = 3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make(tmp_path_factory.mktemp("engine") / "tiny", heads=4, kv_heads=2, layers=N)


@pytest.fixture(scope="module", params=["eager", "sdpa"])
def checkpoint(tiny, request):
    """(checkpoint directory, attention)"""
    return tiny, request.param


def run(checkpoint, request):
    directory, attention = checkpoint
    out = subprocess.run([DUMP, str(directory), "float32", attention], input=json.dumps(request),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def ids(rng, n):
    return rng.integers(0, 151669, size=n).tolist()


def plain(checkpoint, prompts):
    return run(checkpoint, {"prompts": prompts, "layers": list(range(N + 1)), "label_ids": LABELS,
                           "top_k": 5, "prefix_caching": False})


def assert_same(a, b):
    np.testing.assert_allclose(np.array(a["label_logprobs"]), np.array(b["label_logprobs"]), atol=1e-5)
    np.testing.assert_allclose(np.array(a["hidden"]), np.array(b["hidden"]), atol=1e-5, rtol=1e-5)
    assert [[t[0] for t in row] for row in a["top"]] == [[t[0] for t in row] for row in b["top"]]


def test_prompt_group_equals_whole_prompts(checkpoint):
    rng = np.random.default_rng(0)
    prefix = ids(rng, 40)
    suffixes = [ids(rng, n) for n in (1, 5, 12, 3)] + [[]]
    grouped = run(checkpoint, {"groups": [{"prefix": prefix, "suffixes": suffixes}],
                               "layers": list(range(N + 1)), "label_ids": LABELS, "top_k": 5})
    assert_same(grouped, plain(checkpoint, [prefix + s for s in suffixes]))


def test_suffixes_that_begin_alike_compute_their_common_tokens_once(checkpoint):
    # Shifted options all begin "A." and so on: those tokens join the prefix
    # (once, cached with it), the same sequences as whole prompts.
    rng = np.random.default_rng(11)
    prefix, common = ids(rng, 21), ids(rng, 5)
    tails = [ids(rng, n) for n in (4, 1, 7)]
    group = {"prefix": prefix, "suffixes": [common + t for t in tails]}
    grouped = run(checkpoint, {"groups": [group], "layers": list(range(N + 1)),
                               "label_ids": LABELS, "top_k": 5})
    assert_same(grouped, plain(checkpoint, [prefix + common + t for t in tails]))
    counted = run(checkpoint, {"calls": [{"groups": [group], "label_ids": LABELS}]})
    assert counted["tokens_run"] == 21 + 5 + 4 + 1 + 7
    # A prompt that ends with the prefix keeps the group as it came.
    alone = run(checkpoint, {"calls": [{"groups": [{**group, "suffixes": group["suffixes"] + [[]]}],
                                        "label_ids": LABELS}]})
    assert alone["tokens_run"] == 21 + 3 * 5 + 4 + 1 + 7


def test_prefix_cache_across_calls_is_exact_and_saves_work(checkpoint):
    rng = np.random.default_rng(1)
    state = ids(rng, 60)  # shared by every question
    questions = [state + ids(rng, 8) for _ in range(4)]
    suffixes = [[ids(rng, 6) for _ in range(3)] for _ in questions]
    calls = [{"groups": [{"prefix": q, "suffixes": s}], "layers": list(range(N + 1)),
              "label_ids": LABELS, "top_k": 5} for q, s in zip(questions, suffixes)]
    cached = run(checkpoint, {"calls": calls})
    uncached = run(checkpoint, {"calls": calls, "prefix_caching": False})
    for a, b in zip(cached["calls"], uncached["calls"]):
        assert_same(a, b)
    want = plain(checkpoint, [q + s for q, ss in zip(questions, suffixes) for s in ss])
    for field in ("label_logprobs", "hidden", "top"):
        merged = {field: [row for call in cached["calls"] for row in call[field]]}
        if field == "top":
            assert [[t[0] for t in r] for r in merged[field]] == [[t[0] for t in r] for r in want[field]]
        else:
            np.testing.assert_allclose(np.array(merged[field]), np.array(want[field]), atol=1e-5, rtol=1e-5)
    # Questions 2..4 (x2: logprobs and hidden states) reuse the 60-token state.
    assert cached["prefix_hits"] >= 7
    assert cached["tokens_run"] < uncached["tokens_run"] - 3 * 60


def test_early_stop_with_a_prefix(checkpoint):
    rng = np.random.default_rng(2)
    group = {"prefix": ids(rng, 30), "suffixes": [ids(rng, 4), ids(rng, 9)]}
    full = run(checkpoint, {"groups": [group], "layers": list(range(N + 1))})
    for b in range(1, N):
        early = run(checkpoint, {"groups": [group], "layers": [b]})
        np.testing.assert_array_equal(np.array(early["hidden"])[:, 0], np.array(full["hidden"])[:, b])


def test_small_batches_and_a_tiny_cache_change_nothing(checkpoint):
    rng = np.random.default_rng(3)
    groups = [{"prefix": ids(rng, 25), "suffixes": [ids(rng, n) for n in (2, 7, 4)]} for _ in range(3)]
    request = {"groups": groups, "layers": [0, 2, N], "label_ids": LABELS, "top_k": 5}
    big = run(checkpoint, request)
    # A pool of 4 blocks of 16 positions (1152 bytes each in this model):
    # one group at a time, each evicting the last.
    small = run(checkpoint, {**request, "batch_tokens": 8, "kv_pool_bytes": 4 * 16 * 1152})
    assert_same(big, small)


def test_a_cached_state_is_extended_in_its_suffixes_pass(checkpoint):
    # Three questions about one state, one call each. The first computes the
    # state; the others find its full blocks cached and run the rest of
    # their prefix in the pass of their suffixes.
    rng = np.random.default_rng(4)
    state = ids(rng, 50)
    questions = [state + ids(rng, n) for n in (3, 9, 5)]
    suffixes = [[ids(rng, n) for n in (9, 2, 6)] for _ in questions]
    want = plain(checkpoint, [q + s for q, ss in zip(questions, suffixes) for s in ss])
    for fields in ({"label_ids": LABELS, "top_k": 5}, {"layers": list(range(N + 1))}):
        for budget in ({}, {"batch_tokens": 18}):
            calls = [{"groups": [{"prefix": q, "suffixes": s}], **fields}
                     for q, s in zip(questions, suffixes)]
            got = run(checkpoint, {"calls": calls, **budget})
            for field in ("label_logprobs", "hidden", "top"):
                if field not in got["calls"][0]:
                    continue
                merged = [row for call in got["calls"] for row in call[field]]
                if field == "top":
                    assert [[t[0] for t in r] for r in merged] == [[t[0] for t in r] for r in want[field]]
                else:
                    np.testing.assert_allclose(np.array(merged), np.array(want[field]),
                                               atol=1e-5, rtol=1e-5)
            # One pass per call. With 18 tokens a pass, the first call's
            # 53-token prefix runs in chunks of 16 (block boundaries), its
            # last 5 tokens with the suffixes of 9 and 2, then 6: five
            # passes; the others reuse 48 cached positions and run their
            # rest (11, 7) with what fits, then the remaining suffixes.
            assert got["passes"] == (3 if not budget else 5 + 2 + 2), got["passes"]
            assert got["prefix_hits"] == 2, got


def test_many_groups_of_many_states_share_one_pass(checkpoint):
    # 3 states x 4 questions in one call: one pass for everything, each
    # state computed once (its later questions find its blocks, published by
    # the segment before them in the same pass).
    rng = np.random.default_rng(6)
    states = [ids(rng, n) for n in (37, 16, 45)]
    groups = [{"prefix": st + ids(rng, 5), "suffixes": [ids(rng, n) for n in (1, 4, 2)]}
              for _ in range(4) for st in states]
    got = run(checkpoint, {"groups": groups, "layers": list(range(N + 1)),
                           "label_ids": LABELS, "top_k": 5})
    want = plain(checkpoint, [g["prefix"] + s for g in groups for s in g["suffixes"]])
    assert_same(got, want)
    assert got["passes"] == 2  # one for the hidden states, one for logprobs


def test_block_boundaries_and_partial_hits(checkpoint):
    # Blocks of 4: prefixes that share 13 tokens (3 full blocks and a partial
    # one), a prefix that is a block multiple, and whole prompts that end
    # inside a cached block.
    rng = np.random.default_rng(7)
    common = ids(rng, 13)
    groups = [{"prefix": common + ids(rng, n), "suffixes": [ids(rng, 3), ids(rng, 1), []]}
              for n in (0, 3, 7)]
    whole = [common + ids(rng, 2), common[:8]]
    calls = [{"groups": [g], "layers": list(range(N + 1)), "label_ids": LABELS, "top_k": 5}
             for g in groups]
    calls.append({"prompts": whole, "layers": list(range(N + 1)), "label_ids": LABELS,
                  "top_k": 5})
    got = run(checkpoint, {"calls": calls, "kv_block_tokens": 4})
    want_groups = [plain(checkpoint, [g["prefix"] + s for s in g["suffixes"]]) for g in groups]
    for a, b in zip(got["calls"], want_groups + [plain(checkpoint, whole)]):
        assert_same(a, b)
    assert got["prefix_hits"] >= 6, got


def test_a_states_last_partial_block_is_copied_not_recomputed(checkpoint):
    # A state of 37 tokens (two full blocks of 16 and 5 more) and three
    # questions of 12: the first question completes the block that holds
    # the state's last 5 tokens; the others copy those 5 positions' keys and
    # values (within the pass, after its own are written, and across calls)
    # and compute only their question.
    rng = np.random.default_rng(8)
    state = ids(rng, 37)
    groups = [{"prefix": state + ids(rng, 12), "suffixes": [ids(rng, 2), ids(rng, 1)]}
              for _ in range(3)]
    fields = {"label_ids": LABELS, "top_k": 5}  # one pass a call
    want = plain(checkpoint, [g["prefix"] + s for g in groups for s in g["suffixes"]])

    def same(rows, field):
        if field == "top":
            assert [[t[0] for t in r] for r in rows] == [[t[0] for t in r] for r in want[field]]
        else:
            np.testing.assert_allclose(np.array(rows), np.array(want[field]), atol=1e-5)

    one_pass = run(checkpoint, {"calls": [{"groups": groups, **fields}]})
    calls = run(checkpoint, {"calls": [{"groups": [g], **fields} for g in groups]})
    for got, passes in ((one_pass, 1), (calls, 3)):
        assert got["passes"] == passes
        assert got["tokens_run"] == 49 + 2 * 12 + 3 * 3, got["tokens_run"]
        for field in ("label_logprobs", "top"):
            same([row for call in got["calls"] for row in call[field]], field)


def test_a_group_larger_than_the_pool_is_refused_at_once(checkpoint):
    directory, attention = checkpoint
    rng = np.random.default_rng(8)
    request = {"groups": [{"prefix": ids(rng, 100), "suffixes": [ids(rng, 5)]}],
               "label_ids": LABELS, "kv_pool_bytes": 4 * 16 * 1152}
    out = subprocess.run([DUMP, str(directory), "float32", attention], input=json.dumps(request),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert "needs 8 KV blocks" in out.stderr and "engine.kv_pool_bytes" in out.stderr, out.stderr


def test_a_short_prefix_runs_in_its_suffixes_pass_without_a_cache(checkpoint):
    # Nothing cached: the prefix is a segment of its suffixes' pass.
    rng = np.random.default_rng(5)
    prefix, suffixes = ids(rng, 4), [ids(rng, 7), ids(rng, 2), ids(rng, 4)]
    for cache in (False, True):
        got = run(checkpoint, {"groups": [{"prefix": prefix, "suffixes": suffixes}],
                               "layers": list(range(N + 1)), "label_ids": LABELS, "top_k": 5,
                               "prefix_caching": cache})
        assert_same(got, plain(checkpoint, [prefix + s for s in suffixes]))
        assert got["passes"] == 2  # one for the hidden states, one for logprobs


def refused(checkpoint, request):
    directory, attention = checkpoint
    out = subprocess.run([DUMP, str(directory), "float32", attention], input=json.dumps(request),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout
    return out.stderr


def test_callers_that_stopped_are_answered_with_their_own_status_and_nothing_runs(checkpoint):
    # Callers that cancel are not callers whose deadline passed: each is
    # answered with its own status (Caller::StopStatus, the one rule), before
    # any pass.
    rng = np.random.default_rng(12)
    groups = [{"prefix": ids(rng, 9), "suffixes": [ids(rng, 3)]} for _ in range(2)]
    for stopped in (["cancelled", "cancelled"], ["cancelled", "deadline"], ["deadline"] * 2):
        parts = [{"first_group": g, "stopped": s} for g, s in enumerate(stopped)]
        stderr = refused(checkpoint, {"groups": groups, "label_ids": LABELS, "parts": parts})
        want = "CANCELLED: " if stopped[0] == "cancelled" else "DEADLINE_EXCEEDED: "
        assert stderr.startswith(want + "waiting in the queue: "), stderr


def test_the_engine_goes_on_for_the_callers_still_waiting(checkpoint):
    rng = np.random.default_rng(13)
    groups = [{"prefix": ids(rng, 9 + 4 * g), "suffixes": [ids(rng, 3), ids(rng, 2)]}
              for g in range(3)]
    parts = [{"first_group": 0, "stopped": "cancelled"}, {"first_group": 1},
             {"first_group": 2, "stopped": "deadline"}]
    got = run(checkpoint, {"groups": groups, "layers": list(range(N + 1)), "label_ids": LABELS,
                           "top_k": 5, "parts": parts})
    assert got["parts"][0].startswith("CANCELLED: waiting in the queue: ")
    assert got["parts"][1] == "OK"
    assert got["parts"][2].startswith("DEADLINE_EXCEEDED: waiting in the queue: ")
    alone = plain(checkpoint, [groups[1]["prefix"] + s for s in groups[1]["suffixes"]])
    assert_same({k: got[k] for k in ("label_logprobs", "hidden", "top")}, alone)
