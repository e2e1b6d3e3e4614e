"""Batching across calls (issue 4): Logprobs calls queued behind each other
in mesa-anyjevd run as one model call, so their prompts share forward
batches, and every caller still gets exactly what it gets alone (float32,
within 1e-5) on a tiny random Qwen3."""
import re
import sys
from pathlib import Path

import numpy as np

from conftest import pb

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

TOL = 1e-5


def request(prompt_ids, label_ids):
    return pb.LogprobsRequest(groups=[pb.PromptGroup(
        suffixes=[pb.Segment(ids=pb.TokenIds(ids=prompt_ids))], label_ids=label_ids)], top_k=5)


def histogram(text, name):
    """{le: count} of a histogram's buckets."""
    out = {}
    for le, value in re.findall(rf'^{name}_bucket\{{le="([^"]+)"\}} (\S+)$', text, re.M):
        out[le] = float(value)
    return out


def test_queued_calls_share_batches_and_answer_exactly(start_daemon, tmp_path):
    checkpoint = make(tmp_path / "tiny-qwen3", layers=2)
    daemon = start_daemon("--model", str(checkpoint), "--set", "model.name=tiny/qwen3",
                          "--set", "server.queue_capacity=64")
    rng = np.random.default_rng(7)
    labels = [int(i) for i in rng.integers(100, 5000, size=4)]
    prompts = [[int(i) for i in rng.integers(100, 150000, size=int(n))]
               for n in rng.integers(20, 60, size=12)]
    alone = [daemon.stub.Logprobs(request(p, labels), timeout=60) for p in prompts]
    before = histogram(daemon.metrics(), "mesa_anyjev_batch_size")

    # Long calls occupy the engine; the twelve queue behind them together.
    blockers = [daemon.stub.Logprobs.future(request(
        [int(i) for i in rng.integers(100, 150000, size=8000)], labels), timeout=120)
        for _ in range(2)]
    futures = [daemon.stub.Logprobs.future(request(p, labels), timeout=120) for p in prompts]
    results = [f.result() for f in futures]
    for b in blockers:
        b.result()

    for got, want in zip(results, alone):
        g, w = got.groups[0].prompts[0], want.groups[0].prompts[0]
        assert np.allclose(g.label_logprobs, w.label_logprobs, atol=TOL, rtol=0)
        assert [t.id for t in g.top] == [t.id for t in w.top]
        assert g.n_tokens == w.n_tokens
    # Some forward batch held several callers' prompts (the calls alone
    # each ran in batches of one row).
    after = histogram(daemon.metrics(), "mesa_anyjev_batch_size")
    multi_before = before["+Inf"] - before["1"]
    multi_after = after["+Inf"] - after["1"]
    assert multi_before == 0
    assert multi_after >= 1
