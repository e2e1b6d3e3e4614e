"""Client: mesa-anyjevd's RPCs as typed Python calls (docs/rpc.md)."""
from __future__ import annotations

import copy
import json
import os
import random
import re
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from ._proto.mesa.anyjev.v1 import decisions_pb2 as dpb
from ._proto.mesa.anyjev.v1 import decisions_pb2_grpc
from ._proto.mesa.anyjev.v1 import inference_pb2 as ipb
from ._proto.mesa.anyjev.v1 import inference_pb2_grpc
from .errors import NotFound, from_rpc_error
from .pipeline import (DEFAULT_CONCURRENCY, DEFAULT_SPAN, DecideStream, Progress, RetryPolicy,
                       State, StateItem, call_with_retries)
from .types import Caller, Decision, Diagnostics, ModelInfo, PromptLogprobs, Question

PathLike = Union[str, "os.PathLike[str]"]

_HEALTH = ("UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN")
# Request metadata a balancer hashes on (docs/operations.md): FNV-1a of the
# first bytes of the call's first state, as the CLI sends it.
_AFFINITY_HEADER = "mesa-anyjev-affinity"
_AFFINITY_BYTES = 256
# The priority class a call asks for (docs/rpc.md, "Roles and priority
# classes"); without it the daemon uses the tenant's default.
_PRIORITY_HEADER = "mesa-anyjev-priority"
_PRIORITIES = ("interactive", "batch")
# gRPC's reconnect backoff grows to 120 s by default: a run retrying across
# a daemon's restart would keep failing long after the daemon is back.
_CHANNEL_OPTIONS = [("grpc.max_reconnect_backoff_ms", 5000)]


def _affinity(text: str) -> str:
    value = 0xCBF29CE484222325
    for byte in text.encode()[:_AFFINITY_BYTES]:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


class Client:
    """A connection to one daemon (or a balancer in front of several).

    >>> with Client("127.0.0.1:50151", token_file="/etc/mesa-anyjev/token") as client:
    ...     [d] = client.decide(["A column of species names"], questions=["term.fits"])
    ...     d.level, d.probs["Yes"]

    Every failed call raises a MesaAnyjevError subclass naming the status
    and the request field (errors.py).

    `priority` ("interactive" or "batch") is the class every call asks
    for; None leaves it to the token's tenant (its default, else
    interactive). decide_stream asks batch unless told otherwise.
    """

    def __init__(self, address: str, *, token: Optional[str] = None,
                 token_file: Optional[PathLike] = None, tls_ca: Optional[PathLike] = None,
                 timeout: float = 30.0, priority: Optional[str] = None) -> None:
        if token is not None and token_file is not None:
            raise ValueError("give token or token_file, not both")
        if token_file is not None:
            token = Path(token_file).read_text().rstrip("\r\n")
        self.timeout = timeout
        self._metadata: Tuple[Tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ())
        self._metadata += _priority_metadata(priority)
        if tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=Path(tls_ca).read_bytes())
            self._channel = grpc.secure_channel(address, credentials, options=_CHANNEL_OPTIONS)
        else:
            self._channel = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
        self._inference = inference_pb2_grpc.InferenceStub(self._channel)
        self._decisions = decisions_pb2_grpc.DecisionsStub(self._channel)
        self._health = self._channel.unary_unary("/grpc.health.v1.Health/Check")
        self._served: Dict[str, Question] = {}  # question id -> definition

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: Any, request: Any, timeout: Optional[float],
              affinity: Optional[str] = None) -> Any:
        metadata = list(self._metadata)
        if affinity:
            metadata.append((_AFFINITY_HEADER, _affinity(affinity)))
        try:
            return method(request, timeout=self.timeout if timeout is None else timeout,
                          metadata=metadata)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    def health(self, service: str = "", *, timeout: Optional[float] = None) -> str:
        """grpc.health.v1 status of `service` ("" = the daemon): "SERVING",
        "NOT_SERVING" (loading, draining), ... Needs no token."""
        # HealthCheckRequest {string service = 1}, encoded by hand so the
        # package needs no health stubs.
        data = service.encode()
        request = (b"\x0a" + _varint(len(data)) + data) if data else b""
        reply = self._call(self._health, request, timeout)
        status = 0
        if reply[:1] == b"\x08":  # HealthCheckResponse {ServingStatus status = 1}
            status = _read_varint(reply, 1)
        return _HEALTH[status] if status < len(_HEALTH) else str(status)

    def info(self, *, timeout: Optional[float] = None) -> ModelInfo:
        """The served model and the request limits in force."""
        m = self._call(self._inference.GetModelInfo, ipb.GetModelInfoRequest(), timeout)
        c = m.caller
        caller = Caller(auth=c.auth, tenant=c.tenant, role=c.role, priority=c.priority,
                        default_priority=c.default_priority, max_priority=c.max_priority,
                        weight=c.weight, max_queued_calls=c.max_queued_calls,
                        max_queued_tokens=c.max_queued_tokens) if m.HasField("caller") else None
        return ModelInfo(name=m.name, identity=m.identity, n_layers=m.n_layers,
                         hidden_size=m.hidden_size, vocab_size=m.vocab_size,
                         max_choice_k=m.max_choice_k, hidden_states=m.hidden_states,
                         server_version=m.server_version,
                         limits={f.name: getattr(m.limits, f.name)
                                 for f in m.limits.DESCRIPTOR.fields},
                         caller=caller)

    def tokenize(self, texts: Sequence[str], *, timeout: Optional[float] = None) -> List[List[int]]:
        """Token ids of each text under the served model's tokenizer."""
        texts = _sequence("texts", texts)
        reply = self._call(self._inference.Tokenize, ipb.TokenizeRequest(texts=texts), timeout,
                           affinity=texts[0] if texts else None)
        return [list(item.ids) for item in reply.items]

    def logprobs(self, prefix: str, suffixes: Sequence[str], label_ids: Sequence[int] = (),
                 top_k: int = 0, *, timeout: Optional[float] = None) -> List[PromptLogprobs]:
        """Next-token log-probabilities at the end of each prompt prefix +
        suffixes[i] (one prompt group: the prefix is computed once)."""
        group = ipb.PromptGroup(prefix=ipb.Segment(text=prefix),
                                suffixes=[ipb.Segment(text=s) for s in _sequence("suffixes", suffixes)],
                                label_ids=list(label_ids))
        reply = self._call(self._inference.Logprobs,
                           ipb.LogprobsRequest(groups=[group], top_k=top_k), timeout,
                           affinity=prefix)
        return [PromptLogprobs(label_logprobs=tuple(p.label_logprobs),
                               top=tuple((t.id, t.logprob) for t in p.top), n_tokens=p.n_tokens)
                for p in reply.groups[0].prompts]

    def questions(self, ids: Optional[Sequence[str]] = None, *,
                  timeout: Optional[float] = None) -> List[Question]:
        """The questions the daemon serves by id (all, or `ids` in order),
        each with its key and the level auto serves it at now. Raises
        NotFound naming the id (and the closest one) for an unknown id."""
        request = dpb.ListQuestionsRequest(ids=_sequence("ids", ids or []))
        reply = self._call(self._decisions.ListQuestions, request, timeout)
        listed = [_from_served(s) for s in reply.questions]
        self._served.update((q.id, q) for q in listed)
        return listed

    def decide(self, states: Sequence[State], questions: Sequence[Union[str, Question]],
               level: str = "auto", require: Optional[str] = None, *, exact_heads: bool = True,
               timeout: Optional[float] = None) -> List[Decision]:
        """A decision per (state, question), state-major.

        `questions` are ids of served questions (resolved once per client
        through ListQuestions, so the key is the one the CLI and promoted
        bundles use) or Question values. `level`: "auto" (L2 where a head of
        the question's key serves, else L1 where an artifact does, else L0),
        "L2", "L1", "L0" or "raw"; `require` refuses the call when a
        question would be served below it. `exact_heads` (the CLI's
        setting) serves L2 only from a head fit on the exact key.
        """
        messages = [_state(s, i) for i, s in enumerate(_sequence("states", states))]
        request = dpb.DecideRequest(states=messages, questions=self._resolve(questions),
                                    level=level, require=require or "",
                                    options=dpb.DecideOptions(exact_heads=exact_heads))
        first = (messages[0].text or messages[0].json) if messages else None
        reply = self._call(self._decisions.Decide, request, timeout, affinity=first)
        return [_decision(d) for d in reply.decisions]

    def decide_stream(self, states: Iterable[Union[State, StateItem]],
                      questions: Sequence[Union[str, Question]], level: str = "auto",
                      require: Optional[str] = None, *, exact_heads: bool = True,
                      span: int = DEFAULT_SPAN, concurrency: int = DEFAULT_CONCURRENCY,
                      start: int = 0, deadline: Optional[float] = None,
                      retry: RetryPolicy = RetryPolicy(),
                      progress: Optional[Callable[[Progress], None]] = None,
                      priority: Optional[str] = "batch") -> DecideStream:
        """Decides a dataset: each state's StateResult (its input index, the
        id it came with, a Decision per question in question order, or the
        error that refused it), yielded in input order.

        `states` is any iterable (a list, a generator, read_states(path)) of
        states (as for decide) or StateItem(state, id); it is read as calls
        go out, never more than `concurrency` x `span` states ahead. The run
        is cut by input position alone: span k is states [k*span,
        (k+1)*span), its questions go in one Decide (or one per
        limits.max_decide_questions, by position), and every call carries
        its own batch prior (carry_priors, none sent), so a state's
        decisions depend only on its span, the questions, the level and the
        bundles served: a run retried, resumed or run with another
        concurrency decides alike. `span` may not exceed the daemon's
        limits.max_decide_states (read with GetModelInfo).

        At most `concurrency` calls are in flight, so the daemon packs them
        into full passes. A call that waiting can fix (UNAVAILABLE, a full
        queue's RESOURCE_EXHAUSTED with the daemon's pushback, a call cut by
        a drain, an attempt's own timeout) is sent again after a backoff
        with full jitter (`retry`), within `deadline` seconds for the whole
        run; any other failure raises its MesaAnyjevError with `.span`,
        `.questions` and `.attempts` set, and so does a passed deadline
        (DeadlineExceeded naming the `start` to resume with). A state the
        daemon refuses (INVALID_ARGUMENT naming states[i]: too long, bad
        JSON, over a limit) is yielded with that error, named by its input
        index, and its call sent again without it. `start` resumes an
        interrupted run: the span holding it is decided again whole and
        only states from `start` on are yielded. `progress` is called with
        the counts (Progress) after each span and each retry.

        Its Decide calls ask the `priority` class, batch by default: a
        dataset run yields the engine to interactive calls (a curator's
        single question); None asks what the client asks.
        """
        # Every call of the run, its setup included, asks the run's class.
        run = copy.copy(self)
        if priority is not None:
            run._metadata = tuple(m for m in self._metadata if m[0] != _PRIORITY_HEADER)
            run._metadata += _priority_metadata(priority)
        rng = random.Random()
        end = None if deadline is None else time.monotonic() + deadline
        info = call_with_retries(lambda t: run.info(timeout=t), retry, end, rng)
        max_states = info.limits.get("max_decide_states", 0)
        if max_states > 0 and span > max_states:
            raise ValueError(f"span: {span} states exceed the daemon's "
                             f"limits.max_decide_states={max_states}")
        resolved = call_with_retries(lambda t: run._resolve(questions, timeout=t), retry, end,
                                     rng)
        options = dpb.DecideOptions(exact_heads=exact_heads)
        metadata = list(run._metadata)

        def send(messages: List[dpb.State], lo: int, hi: int, timeout: float) -> Any:
            request = dpb.DecideRequest(states=messages, questions=resolved[lo:hi], level=level,
                                        require=require or "", options=options,
                                        carry_priors=True)
            first = messages[0].text or messages[0].json
            return self._decisions.Decide.future(
                request, timeout=timeout,
                metadata=[*metadata, (_AFFINITY_HEADER, _affinity(first))])

        return DecideStream(
            states, len(resolved), info.limits.get("max_decide_questions", 0), send=send,
            convert=_decision, to_message=_state_message, span=span, concurrency=concurrency,
            start=start, deadline=None if end is None else max(0.0, end - time.monotonic()),
            retry=retry, on_progress=progress, rng=rng)

    def _resolve(self, questions: Sequence[Union[str, Question]],
                 timeout: Optional[float] = None) -> List[dpb.Question]:
        questions = _sequence("questions", questions)
        for i, q in enumerate(questions):
            if not isinstance(q, (str, Question)):
                raise TypeError(f"questions[{i}]: {type(q).__name__}; give an id or a Question")
        missing = list(dict.fromkeys(q for q in questions
                                     if isinstance(q, str) and q not in self._served))
        if missing:
            try:
                self.questions(missing, timeout=timeout)
            except NotFound as error:
                # The daemon names ids[j] of the listing; name the caller's
                # questions[i] instead.
                j = int(re.search(r"\d+", error.field or "0").group())
                i = questions.index(missing[j]) if j < len(missing) else 0
                raise NotFound(error.code,
                               re.sub(r"^ids\[\d+\]", f"questions[{i}]", error.details)) from None
        return [_question_message(self._served[q] if isinstance(q, str) else q)
                for q in questions]


def _priority_metadata(priority: Optional[str]) -> Tuple[Tuple[str, str], ...]:
    if priority is None:
        return ()
    if priority not in _PRIORITIES:
        raise ValueError(f"priority: {priority!r} is not 'interactive' or 'batch'")
    return ((_PRIORITY_HEADER, priority),)


def _sequence(name: str, values: Any) -> List[Any]:
    # One str is a sequence of characters: a likely mistake, refused.
    if isinstance(values, (str, bytes, Mapping)):
        raise TypeError(f"{name}: give a list (wrap one value in [...])")
    return list(values)


def _state(value: State, index: int) -> dpb.State:
    if isinstance(value, str):
        return dpb.State(text=value)
    if isinstance(value, (bytes, bytearray)):
        raise TypeError(f"states[{index}]: bytes; give str (decoded text) or a JSON value")
    return dpb.State(json=json.dumps(value, ensure_ascii=False, allow_nan=False))


def _state_message(value: State) -> dpb.State:
    """A run's state as its message; TypeError or ValueError (the state's
    refusal) for bytes, a value JSON cannot hold, or text that is not UTF-8
    (a lone surrogate)."""
    if isinstance(value, (bytes, bytearray)):
        raise TypeError("bytes; give str (decoded text) or a JSON value")
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           allow_nan=False)
    text.encode("utf-8")  # UnicodeEncodeError is a ValueError
    return dpb.State(text=value) if isinstance(value, str) else dpb.State(json=text)


def _question_message(q: Question) -> dpb.Question:
    message = dpb.Question(id=q.id, kind=q.kind, text=q.text, options=list(q.options),
                           bins=q.bins, labels=list(q.labels))
    if q.scale is not None:
        message.scale_lo, message.scale_hi = q.scale
    return message


def _from_served(served: Any) -> Question:
    q = served.question
    has_scale = q.HasField("scale_lo") or q.HasField("scale_hi")
    return Question(
        id=q.id, kind=q.kind, text=q.text, options=tuple(q.options), bins=q.bins,
        scale=(q.scale_lo if q.HasField("scale_lo") else 0.0,
               q.scale_hi if q.HasField("scale_hi") else 1.0) if has_scale else None,
        labels=tuple(q.labels), key=served.key, twin=served.twin or None, scope=served.scope,
        level=served.level,
        bundle_version=served.bundle_version if served.HasField("bundle_version") else None)


def _optional(message: Any, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


def _decision(d: Any) -> Decision:
    g = d.diagnostics
    return Decision(
        state_index=d.state_index, question_id=d.question_id, question_key=d.question_key,
        kind=d.kind, level=d.level, probs=dict(zip(d.options, d.probs)), answer=d.answer,
        answer_index=d.answer_index, confidence=d.confidence, margin=d.margin,
        p_true=_optional(d, "p_true"), score_value=_optional(d, "score_value"),
        diagnostics=Diagnostics(
            shifts_read=g.shifts_read, prior_method=g.prior_method, prompts=g.prompts,
            answer_mass=_optional(g, "answer_mass"), temperature=_optional(g, "temperature"),
            n_calib=g.n_calib, head_version=g.head_version, readout=g.readout,
            routed_from=g.routed_from))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> int:
    value, shift = 0, 0
    while pos < len(data):
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        pos, shift = pos + 1, shift + 7
    return 0
