"""The engine's exactness: prompt groups (a prefix computed once, its
suffixes attending to its keys and values), the prefix cache across calls,
early stop and batching all equal the plain one-prompt forward within 1e-5 in
float32, on a tiny random Qwen3 (the daemon's own Qwen3Backend through
tests/tools/qwen3_dump). Every test runs with eager attention and with sdpa,
whose CPU path attends to a prefix separately and merges the halves
(SharedPrefixAttention)."""
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
                           "top_k": 5, "prefix_cache_bytes": 0})


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


def test_prefix_cache_across_calls_is_exact_and_saves_work(checkpoint):
    rng = np.random.default_rng(1)
    state = ids(rng, 60)  # shared by every question
    questions = [state + ids(rng, 8) for _ in range(4)]
    suffixes = [[ids(rng, 6) for _ in range(3)] for _ in questions]
    calls = [{"groups": [{"prefix": q, "suffixes": s}], "layers": list(range(N + 1)),
              "label_ids": LABELS, "top_k": 5} for q, s in zip(questions, suffixes)]
    cached = run(checkpoint, {"calls": calls})
    uncached = run(checkpoint, {"calls": calls, "prefix_cache_bytes": 0})
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
    small = run(checkpoint, {**request, "batch_tokens": 8, "prefix_cache_bytes": 20000})
    assert_same(big, small)


def test_the_uncached_part_of_a_prefix_rides_in_its_suffixes_pass(checkpoint):
    # Three questions about one state. The first computes the state; the
    # others extend it by at most as many tokens as their longest suffix, so
    # each runs its extension and its suffixes in one pass (row 0 extends the
    # cached prefix, the other rows follow both).
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
            # One batch: a prefill and a pass for the first question, one pass
            # each for the others. Batches of 18 tokens: the first question
            # runs its prefill, then 9+6 | 2; the others run extension+9 | 6+2
            # (the extension row counts against the budget).
            assert got["passes"] == (4 if not budget else 3 + 2 + 2), got["passes"]


def test_a_short_prefix_runs_in_its_suffixes_pass_without_a_cache(checkpoint):
    # Nothing cached: the whole prefix is row 0 and the suffixes follow it.
    rng = np.random.default_rng(5)
    prefix, suffixes = ids(rng, 4), [ids(rng, 7), ids(rng, 2), ids(rng, 4)]
    for cache in (0, 1 << 20):
        got = run(checkpoint, {"groups": [{"prefix": prefix, "suffixes": suffixes}],
                               "layers": list(range(N + 1)), "label_ids": LABELS, "top_k": 5,
                               "prefix_cache_bytes": cache})
        assert_same(got, plain(checkpoint, [prefix + s for s in suffixes]))
        assert got["passes"] == 2  # one for the hidden states, one for logprobs
