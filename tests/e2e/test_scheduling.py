"""The engine's scheduler on the real daemon (docs/architecture.md,
"Scheduling"): the test tools' fault plan holds the engine before its first
pass after the warm-up (`--inject-faults hold@2=FILE`) while the test queues
calls of several tenants and classes, one at a time (each seen held in the
daemon's queue depth before the next is sent, so arrival order is the
test's); the file then releases the engine, and the order of its passes is
read from the daemon's own records (engine.pass_records: one JSON line per
pass, whose work it held in planning order). Every call is one prompt group
of new random token ids (no prefix shared, so none is cached) costing
TOKENS, and a pass holds two of them (engine.batch_tokens), so what each
pass holds follows from the scheduler alone. Each scenario runs under the
fair scheduler and under `engine.scheduler: fifo`, the arrival order it
replaces."""
import json
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

from conftest import add_token, auth, dpb, metric, pb

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

PREFIX, SUFFIX, SUFFIXES = 56, 4, 2
TOKENS = PREFIX + SUFFIX * SUFFIXES  # one call's new tokens
BUDGET = 2 * TOKENS  # engine.batch_tokens: two calls a pass


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make(tmp_path_factory.mktemp("scheduling") / "tiny-qwen3", layers=2)


class Team:
    """A tokens file of tenants made by the real CLI; `token[name]`."""

    def __init__(self, path):
        self.path = path
        self.token = {}

    def add(self, name, *flags):
        self.token[name] = add_token(self.path, name, *flags)


class HeldDaemon:
    """The daemon with its engine held before pass 2 and its passes
    recorded."""

    def __init__(self, start_daemon, checkpoint, team, tmp_path, policy, *settings):
        self.go = tmp_path / f"go-{policy}"
        self.records = tmp_path / f"passes-{policy}.jsonl"
        self.daemon = start_daemon(
            "--model", str(checkpoint), "--inject-faults", f"hold@2={self.go}",
            "--set", f"auth.tokens_file={team.path}",
            "--set", f"engine.scheduler={policy}",
            "--set", f"engine.batch_tokens={BUDGET}",
            "--set", f"engine.pass_records={self.records}", *settings, name=policy)
        self.team = team
        self.rng = np.random.default_rng(7)
        self.futures = []

    def request(self):
        def ids(n):
            return pb.Segment(ids=pb.TokenIds(ids=[int(i) for i in self.rng.integers(1000, 100000, n)]))
        return pb.LogprobsRequest(groups=[pb.PromptGroup(
            prefix=ids(PREFIX), suffixes=[ids(SUFFIX) for _ in range(SUFFIXES)],
            label_ids=[32, 33])])

    def send(self, tenant, priority=None):
        """One call of `tenant`, waited for until the engine holds it; the
        future, or the RpcError of a call refused at once."""
        metadata = auth(self.team.token[tenant])
        if priority is not None:
            metadata.append(("mesa-anyjev-priority", priority))
        held = len(self.futures)
        future = self.daemon.stub.Logprobs.future(self.request(), timeout=300, metadata=metadata)
        # Held (queue depth one more), or answered: a refusal comes at once.
        self.daemon.wait_metrics(
            lambda text: metric(text, "mesa_anyjev_queue_depth") == held + 1 or future.done(),
            f"call {held + 1} held")
        if future.done() and future.exception() is not None:
            return future.exception()
        self.futures.append(future)
        return future

    def release(self):
        """Lets the engine go; every held call answered OK; the passes after
        the warm-up, in order."""
        self.go.touch()
        for future in self.futures:
            assert len(future.result().groups) == 1, "a held call came back without its group"
        return self.passes()

    def passes(self):
        """The passes recorded after the warm-up, in order."""
        passes = [json.loads(line) for line in self.records.read_text().splitlines()]
        assert [p["pass"] for p in passes] == list(range(1, len(passes) + 1))
        assert all(p["tokens"] <= BUDGET for p in passes), passes
        return passes[1:]


def tenant_tokens(passes, upto=None):
    """Tokens computed for each tenant in passes[:upto]."""
    totals = {}
    for p in passes[:upto]:
        for share in p["shares"]:
            totals[share["tenant"]] = totals.get(share["tenant"], 0) + share["tokens"]
    return totals


def last_pass_of(passes, tenant):
    return max(i for i, p in enumerate(passes) if any(s["tenant"] == tenant for s in p["shares"]))


@pytest.fixture
def team(tmp_path):
    team = Team(tmp_path / "tokens.yaml")
    team.add("curator", "--role", "learn")
    team.add("pipe-a", "--role", "decide", "--priority", "batch")
    team.add("pipe-b", "--role", "decide", "--priority", "batch")
    return team


@pytest.mark.parametrize("policy", ["fair", "fifo"])
def test_an_interactive_call_rides_in_the_next_pass(start_daemon, checkpoint, team, tmp_path,
                                                    policy):
    held = HeldDaemon(start_daemon, checkpoint, team, tmp_path, policy)
    for _ in range(4):
        held.send("pipe-a")
    held.send("curator")  # interactive (its tenant's default), arriving last
    passes = held.release()
    first = passes[0]["shares"]
    if policy == "fair":
        # Planned first, and beside it the batch work that fits: the pass
        # stays full.
        assert first[0] == {"tenant": "curator", "class": "interactive", "tokens": TOKENS}
        assert [s["tenant"] for s in first] == ["curator", "pipe-a"]
        assert passes[0]["tokens"] == BUDGET
    else:
        # Arrival order: behind the pipeline's four calls, two passes.
        assert last_pass_of(passes, "curator") == 2
        assert all(s["tenant"] == "pipe-a" for s in first)
    assert tenant_tokens(passes) == {"pipe-a": 4 * TOKENS, "curator": TOKENS}


def test_a_pass_with_interactive_work_is_shorter(start_daemon, checkpoint, team, tmp_path):
    # engine.interactive_pass_tokens: the pass that carries the curator's
    # call holds it and 16 tokens of batch work (one KV block), not a full
    # pass; so does the pass of batch work after it (engine.
    # short_passes_after_interactive, 1), for the curator's next question;
    # then passes are full again.
    short = TOKENS + 16
    held = HeldDaemon(start_daemon, checkpoint, team, tmp_path, "fair", "--set",
                      f"engine.interactive_pass_tokens={short}")
    for _ in range(4):
        held.send("pipe-a")
    held.send("curator")
    passes = held.release()
    assert passes[0]["tokens"] == short
    assert passes[0]["shares"] == [
        {"tenant": "curator", "class": "interactive", "tokens": TOKENS},
        {"tenant": "pipe-a", "class": "batch", "tokens": 16}]
    assert passes[1]["tokens"] == short
    assert {s["tenant"] for s in passes[1]["shares"]} == {"pipe-a"}
    assert passes[2]["tokens"] == BUDGET
    assert tenant_tokens(passes) == {"pipe-a": 4 * TOKENS, "curator": TOKENS}


@pytest.mark.parametrize("policy", ["fair", "fifo"])
def test_two_pipelines_share_by_tokens_not_by_calls_in_flight(start_daemon, checkpoint, team,
                                                              tmp_path, policy):
    # One pipeline keeps 8 calls queued, the other 2, sent after them.
    held = HeldDaemon(start_daemon, checkpoint, team, tmp_path, policy)
    for _ in range(8):
        held.send("pipe-a")
    for _ in range(2):
        held.send("pipe-b")
    passes = held.release()
    b_done = last_pass_of(passes, "pipe-b")
    got = tenant_tokens(passes, b_done + 1)
    if policy == "fair":
        # Equal weights: half each while both have work, so b's two calls
        # run in the first two passes beside two of a's.
        assert b_done == 1 and got == {"pipe-a": 2 * TOKENS, "pipe-b": 2 * TOKENS}
        # Work-conserving: then a alone gets every pass, full.
        assert all(p["tokens"] == BUDGET for p in passes)
    else:
        # Arrival order gives a its 8 calls first: 8:2.
        assert b_done == 4 and got == {"pipe-a": 8 * TOKENS, "pipe-b": 2 * TOKENS}


@pytest.mark.parametrize("policy", ["fair", "fifo"])
def test_weights_divide_the_engine(start_daemon, checkpoint, tmp_path, policy):
    team = Team(tmp_path / "tokens.yaml")
    team.add("pipe-a", "--role", "decide", "--priority", "batch", "--weight", "3")
    team.add("pipe-b", "--role", "decide", "--priority", "batch", "--weight", "1")
    held = HeldDaemon(start_daemon, checkpoint, team, tmp_path, policy)
    for _ in range(6):  # arriving in turns
        held.send("pipe-a")
        held.send("pipe-b")
    passes = held.release()
    a_done = last_pass_of(passes, "pipe-a")
    got = tenant_tokens(passes, a_done + 1)
    ratio = got["pipe-a"] / got["pipe-b"]
    if policy == "fair":
        assert abs(ratio - 3) <= 0.3, got  # 3:1 while both have work
    else:
        assert ratio == 1, got  # arrival order, in turns
    assert tenant_tokens(passes) == {"pipe-a": 6 * TOKENS, "pipe-b": 6 * TOKENS}


def test_a_tenant_at_its_limit_is_refused_while_another_is_admitted(start_daemon, checkpoint,
                                                                    tmp_path):
    team = Team(tmp_path / "tokens.yaml")
    team.add("pipe-a", "--role", "decide", "--max-queued-calls", "2")
    team.add("pipe-b", "--role", "decide")
    team.add("pipe-c", "--role", "decide", "--max-queued-tokens", str(TOKENS + 1))
    # pipe-b has no limit of its own: the engine's default holds for it.
    held = HeldDaemon(start_daemon, checkpoint, team, tmp_path, "fair",
                      "--set", "engine.tenant_max_queued_calls=3")
    held.send("pipe-a")
    held.send("pipe-a")
    refused = held.send("pipe-a")
    assert isinstance(refused, grpc.RpcError), refused
    assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "tenant 'pipe-a' has 2 calls held" in refused.details()
    assert "max_queued_calls in the tokens file" in refused.details()
    for _ in range(3):
        held.send("pipe-b")  # admitted while pipe-a is at its limit
    refused_b = held.send("pipe-b")
    assert isinstance(refused_b, grpc.RpcError), refused_b
    assert refused_b.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "engine.tenant_max_queued_calls" in refused_b.details()
    held.send("pipe-c")  # one call is always admitted, however large
    refused_c = held.send("pipe-c")
    assert isinstance(refused_c, grpc.RpcError), refused_c
    assert refused_c.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"tenant 'pipe-c' has {TOKENS} prompt tokens held" in refused_c.details()
    text = held.daemon.metrics()
    for tenant, limit in (("pipe-a", "tenant_calls"), ("pipe-b", "tenant_calls"),
                          ("pipe-c", "tenant_tokens")):
        assert metric(text, "mesa_anyjev_tenant_refusals_total", tenant=tenant, reason=limit) == 1
        assert metric(text, "mesa_anyjev_rejected_total", reason="queue_full", tenant=tenant) == 1
    passes = held.release()  # what was admitted is served
    assert tenant_tokens(passes) == {"pipe-a": 2 * TOKENS, "pipe-b": 3 * TOKENS,
                                     "pipe-c": TOKENS}
    # Room again once the held calls are answered.
    held.futures = []
    held.send("pipe-a").result(timeout=300)


def test_a_curators_decide_passes_a_pipelines_decides(start_daemon, checkpoint, team, tmp_path):
    # The pipeline's Decides hold every batch decision worker (4) and queue
    # one more; the curator's Decide still reaches the engine at once, and
    # its work is planned first.
    held = HeldDaemon(start_daemon, checkpoint, team, tmp_path, "fair", "--set",
                      "decisions.workers=4")
    question = dpb.Question(kind="choice", text=b"Which?", options=[b"red", b"blue"])

    def decide(tenant, i):
        return held.daemon.decisions.Decide.future(dpb.DecideRequest(
            states=[dpb.State(text=f"state {tenant} {i}".encode())], questions=[question],
            level="L0"), timeout=300, metadata=auth(team.token[tenant]))

    pipeline = [decide("pipe-a", i) for i in range(5)]
    held.daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_queue_depth") == 4 and
                             metric(t, "mesa_anyjev_inflight_requests") == 5,
                             "four Decides at the engine, one waiting for a worker")
    curator = decide("curator", 0)
    held.daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_queue_depth") == 5,
                             "the curator's call at the engine")
    held.go.touch()
    for future in [*pipeline, curator]:
        assert len(future.result().decisions) == 1
    first = held.passes()[0]["shares"][0]
    assert first["tenant"] == "curator" and first["class"] == "interactive", first
