"""Dataset-scale decisions: what Client.decide_stream runs (docs/rpc.md,
"Pipelines").

The rule it shares with the CLI's `decide --states-file`: a run is cut into
calls by input position alone. Span k holds the states [k*S, (k+1)*S) (S,
the span size, 64 by default); all questions of a span go in one Decide
(more than the daemon's limits.max_decide_questions: one call per
max_decide_questions questions, by position); every call sends
carry_priors with no priors, so its batch prior comes from its own states.
A state's decisions then depend only on its span's states, the questions,
the level and the bundles served, whatever the concurrency, retries or
resumption. A state the daemon refuses (INVALID_ARGUMENT naming
`states[i]`) is that state's error; its call is sent again without it.
"""
from __future__ import annotations

import dataclasses
import heapq
import json
import os
import queue
import random
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import (IO, Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping,
                    Optional, Sequence, Tuple, Union)

from .errors import MesaAnyjevError, error_for, from_rpc_error
from .types import Decision

# A state: text (used verbatim) or a JSON value (rendered by the daemon as
# json.dumps(value, indent=2, ensure_ascii=False)).
State = Union[str, Mapping[str, Any], Sequence[Any]]

DEFAULT_SPAN = 64
DEFAULT_CONCURRENCY = 4
_STATE_FIELD = re.compile(r"^states\[(\d+)\]")


@dataclass(frozen=True)
class StateItem:
    """A state with the id a pipeline knows it by (any JSON value; echoed
    in its StateResult), as a `--states-file` line `{"text"|"json": ...,
    "id": ...}` gives it."""

    state: State
    id: Any = None


@dataclass(frozen=True)
class StateResult:
    """One input state's outcome: its input position, the id it came with,
    and a decision per question (in question order), or the error that
    refused it (then `decisions` is empty)."""

    index: int
    id: Any
    decisions: Tuple[Decision, ...] = ()
    error: Optional[MesaAnyjevError] = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Progress:
    """Counts of a run so far: states yielded (decided or refused),
    decisions among them, calls sent again after a retryable failure,
    refused states, and seconds since the run started."""

    states_done: int
    decisions: int
    retries: int
    refused: int
    elapsed: float


@dataclass(frozen=True)
class RetryPolicy:
    """How a call that failed in a way waiting can fix is sent again.

    The wait before attempt n+1 is drawn uniformly from [0, min(max_backoff,
    initial_backoff * 2**n)] (exponential backoff, full jitter), and is at
    least the daemon's pushback when it sent one. `max_attempts` (None: no
    bound but the run's deadline) counts every attempt of one call;
    `attempt_timeout` bounds each (the daemon cuts a deadline above its
    server.max_deadline_s, 120 s by default)."""

    initial_backoff: float = 0.1
    max_backoff: float = 10.0
    max_attempts: Optional[int] = 30
    attempt_timeout: float = 120.0


# --- the cut, and what is retried (pure functions: the unit tests' subject)


def span_of(index: int, span: int) -> int:
    """The span that holds input position `index`."""
    return index // span


def question_groups(n_questions: int, max_questions: int) -> List[Tuple[int, int]]:
    """[lo, hi) of the questions each call of a span carries, by position."""
    step = max_questions if max_questions > 0 else n_questions
    return [(lo, min(lo + step, n_questions)) for lo in range(0, n_questions, step)]


def refused_state(code: str, details: str) -> Optional[int]:
    """The call's state index an INVALID_ARGUMENT names first
    ("states[3].text: ..."), or None when the refusal is not one state's."""
    if code != "INVALID_ARGUMENT":
        return None
    match = _STATE_FIELD.match(details)
    return int(match.group(1)) if match else None


def retry_floor(code: str, pushback_ms: Optional[int]) -> Optional[float]:
    """None when a failure cannot be fixed by waiting; else the least wait
    (seconds) before the call may go again.

    Retried: UNAVAILABLE (loading, draining, a restart, no connection),
    CANCELLED (a call the daemon cut at the end of a drain: a run cancels
    nothing it still waits for), RESOURCE_EXHAUSTED only with the daemon's
    pushback (a full queue; the others, such as a prompt larger than the KV
    pool, would fail again), and DEADLINE_EXCEEDED of an attempt's own
    timeout (the run's deadline ends the run instead). Never
    INVALID_ARGUMENT, PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION,
    NOT_FOUND or any other code."""
    if code == "RESOURCE_EXHAUSTED":
        return pushback_ms / 1000.0 if pushback_ms is not None else None
    if code in ("UNAVAILABLE", "CANCELLED", "DEADLINE_EXCEEDED"):
        return (pushback_ms or 0) / 1000.0
    return None


def backoff(attempt: int, policy: RetryPolicy, floor: float, rng: random.Random) -> float:
    """The wait after the `attempt`-th failure (0-based): full jitter over
    the exponential bound, at least `floor`."""
    bound = min(policy.max_backoff, policy.initial_backoff * (2.0 ** min(attempt, 60)))
    return max(floor, rng.uniform(0.0, bound))


def call_with_retries(fn: Callable[[float], Any], retry: RetryPolicy, end: Optional[float],
                      rng: random.Random, clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> Any:
    """fn(timeout) under the same rule as a run's calls (its first
    GetModelInfo and ListQuestions), `end` the run's deadline on `clock`."""
    attempt = 0
    while True:
        timeout = retry.attempt_timeout
        if end is not None:
            timeout = min(timeout, end - clock())
            if timeout <= 0:
                raise error_for("DEADLINE_EXCEEDED", "the run's deadline passed before it began")
        try:
            return fn(timeout)
        except MesaAnyjevError as error:
            attempt += 1
            floor = retry_floor(error.code, error.pushback_ms)
            if floor is None or (retry.max_attempts is not None and attempt >= retry.max_attempts):
                raise
            wait = backoff(attempt - 1, retry, floor, rng)
            if end is not None and clock() + wait >= end:
                raise
            sleep(wait)


# --- input


def read_states(source: Union[str, "os.PathLike[str]", IO[str]]) -> Iterator[StateItem]:
    """The states of a JSON-lines file (a path, or a text file being read),
    read one line at a time, in the CLI's --states-file format: a JSON
    string (the text), or an object with "text" (a string) or "json" (any
    JSON, rendered as a dict state) and an optional "id". Blank lines are
    skipped; a bad line raises ValueError naming it ("FILE line 7: ...")."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as file:
            yield from _read_lines(file, str(source))
    else:
        yield from _read_lines(source, getattr(source, "name", "input"))


def _read_lines(file: Iterable[str], name: str) -> Iterator[StateItem]:
    for number, line in enumerate(file, 1):
        if not line.strip(" \t\r\n"):
            continue
        yield parse_state_line(line, f"{name} line {number}")


def parse_state_line(line: str, where: str) -> StateItem:
    """One --states-file line as a StateItem; ValueError naming `where`."""
    try:
        value = json.loads(line, object_pairs_hook=_no_duplicate_keys)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if isinstance(value, str):
        return StateItem(value)
    if not isinstance(value, dict) or ("text" in value) == ("json" in value):
        raise ValueError(f'{where}: a JSON string, or an object with "text" or "json" '
                         '(and an optional "id") is required')
    for key in value:
        if key not in ("text", "json", "id"):
            raise ValueError(f'{where}: unknown key "{key}" (text, json or id)')
    if "text" in value:
        if not isinstance(value["text"], str):
            raise ValueError(f"{where}.text: a string is required")
        return StateItem(value["text"], value.get("id"))
    return StateItem(value["json"], value.get("id"))


def _no_duplicate_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key '{key}'")
        out[key] = value
    return out


# --- the run


@dataclass
class _Member:
    """One state of a span: its input position and id, and its State
    message (None when the client refused it before sending)."""

    index: int
    id: Any
    message: Any
    error: Optional[MesaAnyjevError] = None


@dataclass
class _Call:
    """The Decide of one span and one group of questions."""

    span: "_Span"
    questions: Tuple[int, int]  # [lo, hi) of the run's questions
    members: List[int]  # positions in the span still sent
    attempt: int = 0
    due: float = 0.0
    future: Any = None
    run_bound: bool = False  # this attempt's timeout was the run's deadline
    decisions: Optional[Dict[int, List[Decision]]] = None  # position -> decisions

    @property
    def done(self) -> bool:
        return self.decisions is not None


@dataclass
class _Span:
    members: List[_Member]
    calls: List[_Call] = dataclasses.field(default_factory=list)
    refused: Dict[int, MesaAnyjevError] = dataclasses.field(default_factory=dict)
    # position -> the first question of the group whose refusal is kept
    refused_by: Dict[int, int] = dataclasses.field(default_factory=dict)

    @property
    def done(self) -> bool:
        return all(call.done for call in self.calls)

    @property
    def bounds(self) -> Tuple[int, int]:
        first = self.members[0].index
        return first, first + len(self.members)


# Sends one Decide: (State messages, questions [lo, hi), timeout) -> a grpc
# future.
Sender = Callable[[List[Any], int, int, float], Any]
# Turns a reply's decision into a Decision.
Converter = Callable[[Any], Decision]


class DecideStream(Iterator[StateResult]):
    """The iterator Client.decide_stream returns: each state's StateResult
    in input order. `progress()` gives the counts so far; `close()` (or
    leaving the loop) cancels the calls in flight."""

    def __init__(self, states: Iterable[Any], n_questions: int, max_questions: int, *,
                 send: Sender, convert: Converter, to_message: Callable[[Any], Any],
                 span: int = DEFAULT_SPAN, concurrency: int = DEFAULT_CONCURRENCY,
                 start: int = 0, deadline: Optional[float] = None,
                 retry: RetryPolicy = RetryPolicy(),
                 on_progress: Optional[Callable[[Progress], None]] = None,
                 rng: Optional[random.Random] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        for name, value, least in (("span", span, 1), ("concurrency", concurrency, 1),
                                   ("start", start, 0)):
            if value < least:
                raise ValueError(f"{name}: {value} is below {least}")
        self._states = iter(states)
        self._groups = question_groups(n_questions, max_questions)
        self._send, self._convert, self._to_message = send, convert, to_message
        self._span, self._concurrency, self._start = span, concurrency, start
        self._retry = retry
        self._on_progress = on_progress
        self._rng = rng or random.Random()
        self._clock = clock
        self._began = clock()
        self._end = None if deadline is None else self._began + deadline
        self._counts = {"states_done": 0, "decisions": 0, "retries": 0, "refused": 0}
        self._window: Deque[_Span] = deque()  # read, not yet yielded: <= concurrency
        self._ready: Deque[_Call] = deque()
        self._timers: List[Tuple[float, int, _Call]] = []  # (due, tie-break, call)
        self._inflight: Dict[int, _Call] = {}
        self._done: "queue.Queue[_Call]" = queue.Queue()
        self._next_index = 0
        self._exhausted = False
        self._read_error: Optional[BaseException] = None
        self._results = self._run()

    def __next__(self) -> StateResult:
        return next(self._results)

    def __iter__(self) -> "DecideStream":
        return self

    def close(self) -> None:
        """Stops the run: cancels the calls in flight."""
        self._results.close()

    def progress(self) -> Progress:
        return Progress(elapsed=self._clock() - self._began, **self._counts)

    def _report(self) -> None:
        if self._on_progress is not None:
            self._on_progress(self.progress())

    # The loop: read spans while the window has room, send what is due, yield
    # the head span once all its calls are done, else wait for an answer or a
    # timer. Every state change happens on this thread; gRPC's threads only
    # put finished calls on self._done.
    def _run(self) -> Iterator[StateResult]:
        try:
            self._skip(span_of(self._start, self._span) * self._span)
            while True:
                while not self._exhausted and len(self._window) < self._concurrency:
                    self._read_span()
                self._release_timers()
                while self._ready and len(self._inflight) < self._concurrency:
                    self._launch(self._ready.popleft())
                if self._window and self._window[0].done:
                    for result in self._finish(self._window.popleft()):
                        if result.index >= self._start:
                            self._counts["states_done"] += 1
                            self._counts["decisions"] += len(result.decisions)
                            yield result
                    self._report()
                    continue
                if not self._window:
                    break
                self._wait()
            if self._read_error is not None:
                raise self._read_error
        finally:
            for call in self._inflight.values():
                call.future.cancel()
            self._inflight.clear()

    def _skip(self, first: int) -> None:
        # States before the resumed span are read past, never held.
        while self._next_index < first:
            try:
                next(self._states)
            except StopIteration:
                self._exhausted = True
                return
            self._next_index += 1

    def _read_span(self) -> None:
        members: List[_Member] = []
        while len(members) < self._span:
            try:
                value = next(self._states)
            except StopIteration:
                self._exhausted = True
                break
            except Exception as error:  # a bad line: what was read whole is finished first
                self._exhausted, self._read_error = True, error
                return
            index = self._next_index
            self._next_index += 1
            state, state_id = ((value.state, value.id) if isinstance(value, StateItem)
                               else (value, None))
            try:
                members.append(_Member(index, state_id, self._to_message(state)))
            except (TypeError, ValueError) as error:  # bytes, NaN, ...: never sent
                members.append(_Member(index, state_id, None, error_for(
                    "INVALID_ARGUMENT", f"states[{index}]: {error}")))
        if not members:
            return
        span = _Span(members)
        for position, member in enumerate(members):
            if member.error is not None:
                self._refused(span, position, member.error)
        sent = [p for p in range(len(members)) if p not in span.refused]
        for group in self._groups:
            call = _Call(span, group, list(sent))
            if sent:
                self._ready.append(call)
            else:
                call.decisions = {}
            span.calls.append(call)
        self._window.append(span)

    def _launch(self, call: _Call) -> None:
        timeout = self._retry.attempt_timeout
        call.run_bound = False
        if self._end is not None:
            left = self._end - self._clock()
            if left <= 0:
                raise self._deadline_error(call, None)
            if left < timeout:
                timeout, call.run_bound = left, True
        messages = [call.span.members[p].message for p in call.members]
        call.future = self._send(messages, call.questions[0], call.questions[1], timeout)
        self._inflight[id(call)] = call
        call.future.add_done_callback(lambda _f, c=call: self._done.put(c))

    def _wait(self) -> None:
        # Calls in flight end by their own deadline (never past the run's);
        # a timer is due before the run's end.
        timeout = max(0.0, self._timers[0][0] - self._clock()) if self._timers else None
        if timeout is None and not self._inflight:
            raise RuntimeError("decide_stream: nothing in flight and nothing due")
        try:
            call = self._done.get(timeout=timeout)
        except queue.Empty:
            return
        if self._inflight.pop(id(call), None) is not None:
            self._answered(call)

    def _release_timers(self) -> None:
        now = self._clock()
        while self._timers and self._timers[0][0] <= now:
            self._ready.append(heapq.heappop(self._timers)[2])

    def _answered(self, call: _Call) -> None:
        future, call.future = call.future, None
        error = future.exception()
        if error is None:
            call.decisions = {p: [] for p in call.members}
            for d in future.result().decisions:
                call.decisions[call.members[d.state_index]].append(self._convert(d))
            return
        failed = from_rpc_error(error)
        j = refused_state(failed.code, failed.details)
        if j is not None and j < len(call.members):
            self._refuse(call, j, failed)
            return
        call.attempt += 1
        if failed.code == "DEADLINE_EXCEEDED" and call.run_bound:
            raise self._deadline_error(call, failed)
        floor = retry_floor(failed.code, failed.pushback_ms)
        limit = self._retry.max_attempts
        if floor is None or (limit is not None and call.attempt >= limit):
            raise self._located(failed, call)
        due = self._clock() + backoff(call.attempt - 1, self._retry, floor, self._rng)
        if self._end is not None and due >= self._end:
            raise self._deadline_error(call, failed)
        heapq.heappush(self._timers, (due, id(call), call))
        self._counts["retries"] += 1
        self._report()

    def _refuse(self, call: _Call, j: int, failed: MesaAnyjevError) -> None:
        position = call.members.pop(j)
        index = call.span.members[position].index
        # Named by input position, as the caller knows the state.
        self._refused(call.span, position, error_for(
            failed.code, _STATE_FIELD.sub(f"states[{index}]", failed.details, 1)),
            call.questions[0])
        if call.members:
            self._ready.appendleft(call)  # the rest again, at once
        else:
            call.decisions = {}

    def _refused(self, span: _Span, position: int, error: MesaAnyjevError,
                 first_question: int = -1) -> None:
        # A state refused by two calls of its span (two question groups)
        # counts once and keeps the earliest group's refusal, whichever
        # answered first: the one a single call of every question gives.
        if position not in span.refused:
            self._counts["refused"] += span.members[position].index >= self._start
        elif span.refused_by[position] <= first_question:
            return
        span.refused[position] = error
        span.refused_by[position] = first_question

    def _finish(self, span: _Span) -> Iterator[StateResult]:
        for position, member in enumerate(span.members):
            if position in span.refused:
                yield StateResult(member.index, member.id, (), span.refused[position])
                continue
            decisions: List[Decision] = []
            for call in span.calls:
                decisions.extend(dataclasses.replace(d, state_index=member.index)
                                 for d in (call.decisions or {}).get(position, ()))
            yield StateResult(member.index, member.id, tuple(decisions))

    def _located(self, error: MesaAnyjevError, call: _Call) -> MesaAnyjevError:
        """`error` with the states and questions of the call that failed."""
        error.span = call.span.bounds
        error.questions = call.questions
        error.attempts = call.attempt
        return error

    def _deadline_error(self, call: _Call, last: Optional[MesaAnyjevError]) -> MesaAnyjevError:
        error = error_for("DEADLINE_EXCEEDED", (
            f"the run's deadline passed with {self._counts['states_done']} states yielded; "
            f"resume with start={max(self._start, call.span.bounds[0])}"
            + (f" (last failure: {last})" if last else "")))
        return self._located(error, call)


__all__ = ["StateItem", "StateResult", "Progress", "RetryPolicy", "DecideStream",
           "read_states", "parse_state_line", "span_of", "question_groups", "refused_state",
           "retry_floor", "backoff", "call_with_retries", "DEFAULT_SPAN",
           "DEFAULT_CONCURRENCY"]
