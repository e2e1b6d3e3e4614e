"""The Python client's dataset-scale call (Client.decide_stream's engine,
clients/python/src/mesa_anyjev_client/pipeline.py) against a scripted fake
daemon, no process: the cut by input position, the bounds on calls in flight
and on states read ahead, what is retried and what never is, a refused state
sent again without it, resuming, the deadline, and read_states' line format.
The fake's decisions depend on every state of their call (as a batch prior
makes the daemon's), so any change of cut shows as changed decisions.
test_pipeline.py runs the same call against real daemons."""
import io
import itertools
import json
import math
import queue
import random
import threading
from dataclasses import dataclass, field
from typing import List

import grpc
import pytest

from conftest import client_package

mac = client_package()
from mesa_anyjev_client import pipeline  # noqa: E402
from mesa_anyjev_client.pipeline import (DecideStream, RetryPolicy, StateItem,  # noqa: E402
                                         parse_state_line, read_states)
from mesa_anyjev_client.types import Decision  # noqa: E402

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.01, max_attempts=10)


class RpcError(grpc.RpcError, grpc.Call):
    """A failed call as grpcio raises it: a code, details, trailers."""

    def __init__(self, code, details="", pushback=None):
        self._code, self._details = code, details
        self._trailers = ((("grpc-retry-pushback-ms", str(pushback)),)
                          if pushback is not None else ())

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailers

    def initial_metadata(self):
        return ()

    def is_active(self):
        return False

    def time_remaining(self):
        return None

    def cancel(self):
        return False

    def add_callback(self, callback):
        return False


class Future:
    def __init__(self):
        self._done = threading.Event()
        self._callbacks = []
        self._result = self._error = None
        self.cancelled = False

    def finish(self, result=None, error=None):
        self._result, self._error = result, error
        self._done.set()
        for callback in self._callbacks:
            callback(self)

    def add_done_callback(self, callback):
        if self._done.is_set():
            callback(self)
        else:
            self._callbacks.append(callback)

    def exception(self):
        return self._error

    def result(self):
        return self._result

    def cancel(self):
        self.cancelled = True
        return True


@dataclass
class Reply:
    decisions: list


@dataclass
class FakeDecision:
    state_index: int
    question: int
    value: float


@dataclass
class Sent:
    texts: List[str]
    questions: tuple
    timeout: float


@dataclass
class FakeDaemon:
    """Answers calls on a thread of its own, first come first served.
    `fail(sent, attempt)` returns an RpcError to answer a call with, or None.
    A decision's value is a function of its state, its question and every
    state of its call (a batch prior's dependence)."""

    fail: object = None
    sent: List[Sent] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0

    def __post_init__(self):
        self._lock = threading.Lock()
        self._queue = queue.Queue()
        self._attempts = {}
        threading.Thread(target=self._serve, daemon=True).start()

    def send(self, messages, lo, hi, timeout):
        texts = [m.text or m.json for m in messages]
        with self._lock:
            self.sent.append(Sent(texts, (lo, hi), timeout))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            key = (tuple(texts), lo)
            attempt = self._attempts[key] = self._attempts.get(key, -1) + 1
        future = Future()
        self._queue.put((future, texts, lo, hi, attempt))
        return future

    def _serve(self):
        while True:
            future, texts, lo, hi, attempt = self._queue.get()
            error = self.fail(texts, attempt) if self.fail else None
            with self._lock:
                self.in_flight -= 1
            if error is not None:
                future.finish(error=error)
                continue
            batch = sum(len(t) for t in texts) / len(texts)
            future.finish(Reply([FakeDecision(s, q, hash((t, q)) % 1000 + batch)
                                 for s, t in enumerate(texts) for q in range(hi - lo)]))


def convert(d):
    return Decision(state_index=d.state_index, question_id=f"q{d.question}", question_key="k",
                    kind="noul", level="L0", probs={"Yes": d.value}, answer="Yes",
                    answer_index=0, confidence=1.0, margin=0.0)


class Message:
    def __init__(self, text):
        self.text, self.json = text, ""


def to_message(state):
    if isinstance(state, bytes):
        raise TypeError("bytes; give str (decoded text) or a JSON value")
    if isinstance(state, str):
        return Message(state)
    return Message(json.dumps(state, allow_nan=False))


def texts(n, tag="s"):
    return [f"{tag}{i} " + "x" * (i % 7) for i in range(n)]


def run(states, daemon, n_questions=2, max_questions=0, **options):
    stream = DecideStream(states, n_questions, max_questions, send=daemon.send,
                          convert=convert, to_message=to_message,
                          retry=options.pop("retry", FAST), **options)
    return list(stream), stream


def by_index(results):
    return {r.index: (r.id, r.decisions, r.error and str(r.error)) for r in results}


def test_the_cut_is_a_function_of_input_position_alone():
    assert pipeline.question_groups(5, 2) == [(0, 2), (2, 4), (4, 5)]
    assert pipeline.question_groups(3, 32) == [(0, 3)]
    assert pipeline.question_groups(3, 0) == [(0, 3)]  # a daemon that reports no limit
    assert [pipeline.span_of(i, 64) for i in (0, 63, 64, 150)] == [0, 0, 1, 2]

    reference, _ = run(texts(1000), FakeDaemon(), span=64, concurrency=1)
    assert [r.index for r in reference] == list(range(1000))
    for concurrency in (2, 4, 9):
        daemon = FakeDaemon()
        results, _ = run(iter(texts(1000)), daemon, span=64, concurrency=concurrency)
        assert results == reference, concurrency
        # Every call holds one whole span.
        assert sorted(len(s.texts) for s in daemon.sent) == [40] + [64] * 15
        assert daemon.most_in_flight <= concurrency
    # Another span size is another cut: other decisions.
    other, _ = run(texts(1000), FakeDaemon(), span=50, concurrency=4)
    assert [r.decisions for r in other] != [r.decisions for r in reference]


def test_questions_over_the_limit_go_in_several_calls_by_position():
    daemon = FakeDaemon()
    results, _ = run(texts(130), daemon, n_questions=5, max_questions=2, span=64)
    assert sorted({s.questions for s in daemon.sent}) == [(0, 2), (2, 4), (4, 5)]
    assert len(daemon.sent) == 3 * 3
    assert all([d.question_id for d in r.decisions] == ["q0", "q1", "q0", "q1", "q0"]
               for r in results)


def test_states_are_not_read_ahead_of_the_window():
    pulled = itertools.count()
    seen = []

    def states():
        for i in range(10_000_000):
            seen.append(next(pulled))
            yield f"s{i}"

    stream = DecideStream(states(), 1, 0, send=FakeDaemon().send, convert=convert,
                          to_message=to_message, span=16, concurrency=3, retry=FAST)
    for n, result in enumerate(itertools.islice(stream, 500)):
        assert result.index == n
        assert len(seen) - n <= 3 * 16
    stream.close()


def test_what_is_retried_and_what_never_is():
    floor = pipeline.retry_floor
    assert floor("UNAVAILABLE", None) == 0.0 and floor("UNAVAILABLE", 500) == 0.5
    assert floor("CANCELLED", None) == 0.0
    assert floor("RESOURCE_EXHAUSTED", 100) == 0.1
    assert floor("RESOURCE_EXHAUSTED", None) is None  # a KV pool too small, a message too big
    assert floor("DEADLINE_EXCEEDED", None) == 0.0
    for code in ("INVALID_ARGUMENT", "PERMISSION_DENIED", "UNAUTHENTICATED",
                 "FAILED_PRECONDITION", "NOT_FOUND", "INTERNAL", "UNKNOWN", "ABORTED"):
        assert floor(code, 100) is None, code
    rng = random.Random(1)
    policy = RetryPolicy(initial_backoff=0.1, max_backoff=2.0)
    waits = [pipeline.backoff(n, policy, 0.0, rng) for n in range(12) for _ in range(50)]
    assert all(0 <= w <= 2.0 for w in waits) and max(waits[:50]) <= 0.1
    assert min(waits) < 0.01 < max(waits[-50:])  # full jitter over the whole bound
    assert all(pipeline.backoff(n, policy, 0.3, rng) >= 0.3 for n in range(12))

    reference, _ = run(texts(300), FakeDaemon(), span=32)
    # Every call's first two attempts fail in a retryable way.
    errors = [RpcError(grpc.StatusCode.UNAVAILABLE, "draining", pushback=1),
              RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "queue full", pushback=1),
              RpcError(grpc.StatusCode.CANCELLED, "cut by the drain deadline"),
              RpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "attempt timed out")]
    daemon = FakeDaemon(fail=lambda t, a: errors[(len(t[0]) + a) % 4] if a < 2 else None)
    counts = []
    results, stream = run(texts(300), daemon, span=32, on_progress=counts.append)
    assert results == reference
    assert stream.progress().retries == 2 * 10 == counts[-1].retries
    assert counts[-1].states_done == 300 and counts[-1].decisions == 600

    for code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT,
                 grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
                 grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
        daemon = FakeDaemon(fail=lambda t, a, code=code: RpcError(code, "questions[0]: no")
                            if t[0].startswith("s64 ") else None)
        with pytest.raises(mac.MesaAnyjevError) as error:
            run(texts(300), daemon, span=32)
        assert error.value.code == code.name
        assert error.value.span == (64, 96) and error.value.attempts == 1
        assert sum(s.texts[0].startswith("s64 ") for s in daemon.sent) == 1  # never again

    daemon = FakeDaemon(fail=lambda t, a: RpcError(grpc.StatusCode.UNAVAILABLE, "gone"))
    with pytest.raises(mac.Unavailable) as error:
        run(texts(10), daemon, retry=RetryPolicy(0.001, 0.001, max_attempts=3))
    assert error.value.attempts == 3 and len(daemon.sent) == 3


def test_a_refused_state_is_its_own_error_and_the_rest_is_decided():
    states = texts(200)
    for bad in (5, 70, 71, 199):
        states[bad] = f"BAD{bad}"

    def fail(sent, attempt):
        for j, text in enumerate(sent):
            if text.startswith("BAD"):
                return RpcError(grpc.StatusCode.INVALID_ARGUMENT,
                                f"states[{j}]: a decision prompt of 9000 tokens exceeds "
                                "limits.max_prompt_tokens=8192 (shorten the state)")
        return None

    daemon = FakeDaemon(fail=fail)
    results, stream = run(states, daemon, span=64, concurrency=2)
    refused = {r.index: r.error for r in results if not r.ok}
    assert sorted(refused) == [5, 70, 71, 199]
    for index, error in refused.items():
        assert isinstance(error, mac.InvalidArgument) and error.field == f"states[{index}]"
        assert "limits.max_prompt_tokens" in str(error)
    assert all(len(r.decisions) == 2 for r in results if r.ok)
    assert stream.progress().refused == 4 and stream.progress().retries == 0
    # Deterministic: each call went again without the refused state; the
    # last sending of each span holds exactly its good states.
    assert sorted(s.texts for s in daemon.sent if not any(t.startswith("BAD") for t in s.texts)) \
        == sorted([t for t in states[lo:lo + 64] if not t.startswith("BAD")]
                  for lo in (0, 64, 128, 192))
    # A state the client cannot send (bytes, NaN) is refused before any call.
    results, _ = run(["a", b"raw", {"v": math.nan}, "d"], FakeDaemon())
    assert [r.ok for r in results] == [True, False, False, True]
    assert results[1].error.field == "states[1]" and "bytes" in str(results[1].error)
    assert results[2].error.field == "states[2]"


def test_resuming_decides_the_whole_span_and_yields_from_start():
    states = [StateItem(t, id=f"id{i}") for i, t in enumerate(texts(300))]
    reference, _ = run(states, FakeDaemon(), span=64)
    assert [r.id for r in reference] == [f"id{i}" for i in range(300)]
    for start in (0, 64, 150, 299, 300, 5000):
        daemon = FakeDaemon()
        results, _ = run(iter(states), daemon, span=64, concurrency=3, start=start)
        assert results == reference[start:], start
        assert all(len(s.texts) == 64 or s.texts[0].startswith("s256 ") for s in daemon.sent)


def test_the_run_deadline_ends_retries_and_names_where_to_resume():
    def fail(sent, attempt):
        return RpcError(grpc.StatusCode.UNAVAILABLE, "gone") if sent[0].startswith("s64 ") \
            else None

    stream = DecideStream(texts(200), 1, 0, send=FakeDaemon(fail=fail).send,
                          convert=convert, to_message=to_message, span=64,
                          deadline=0.5, retry=RetryPolicy(0.01, 0.05, max_attempts=None))
    got = []
    with pytest.raises(mac.DeadlineExceeded) as error:
        for r in stream:
            got.append(r.index)
    assert got == list(range(64))
    assert "resume with start=64" in str(error.value) and error.value.span == (64, 128)
    # Each attempt's timeout was cut to what was left of the run.
    daemon = FakeDaemon()
    run(texts(10), daemon, deadline=30, retry=RetryPolicy(attempt_timeout=60))
    assert 0 < daemon.sent[0].timeout <= 30


def test_read_states_matches_the_cli_line_format():
    lines = ['"plain text"', '{"text": "t", "id": 7}', "", '  ',
             '{"json": {"name": "depth", "unit": "m"}, "id": "b"}', '{"id": null, "text": "u"}']
    assert list(read_states(io.StringIO("\n".join(lines) + "\n"))) == [
        StateItem("plain text"), StateItem("t", 7), StateItem({"name": "depth", "unit": "m"}, "b"),
        StateItem("u")]
    for line, why in [('{"text": "a", "json": 1}', 'an object with "text" or "json"'),
                      ('{"id": 1}', 'an object with "text" or "json"'),
                      ('17', 'a JSON string, or an object'),
                      ('{"text": "a", "note": 1}', 'unknown key "note" (text, json or id)'),
                      ('{"text": 3}', 'where.text: a string is required'),
                      ('{"text": "a", "text": "b"}', "duplicate key 'text'"),
                      ('{"text": ', 'where: ')]:
        with pytest.raises(ValueError) as error:
            parse_state_line(line, "where")
        assert why in str(error.value), (line, str(error.value))
    # Lazily: a bad line ends the run after the spans read whole before it,
    # and names its line.
    lines = ['"ok"'] * 70 + ['{"text": "x", "bad": 1}'] + ['"ok"'] * 5
    source = io.StringIO("\n".join(lines) + "\n")
    source.name = "states.jsonl"
    stream = DecideStream(read_states(source), 1, 0, send=FakeDaemon().send,
                          convert=convert, to_message=to_message, span=32, retry=FAST)
    got = []
    with pytest.raises(ValueError, match=r"states.jsonl line 71: unknown key \"bad\""):
        for r in stream:
            got.append(r.index)
    assert got == list(range(64))
