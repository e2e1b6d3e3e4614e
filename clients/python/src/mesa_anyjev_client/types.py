"""The plain values mesa-anyjev-client returns (frozen dataclasses)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class Question:
    """A typed question. Those from Client.questions() carry what the daemon
    serves: `key` (the anyjev key the CLI and promoted bundles use), `twin`,
    `scope`, the `level` auto serves it at now and the `bundle_version`
    behind it. One you define yourself leaves those None; the daemon then
    computes its key from kind, text and options."""

    id: str
    kind: str  # "choice" | "noul" | "score"
    text: str
    options: Tuple[str, ...] = ()
    bins: int = 0  # score without levels: equal-width bins (0 = 5)
    scale: Optional[Tuple[float, float]] = None  # score bins' range, default (0, 1)
    labels: Tuple[str, ...] = ()  # custom answer labels, one token each
    key: Optional[str] = None
    twin: Optional[str] = None
    scope: Optional[str] = None
    level: Optional[str] = None  # "L2" | "L1" | "L0"
    bundle_version: Optional[int] = None


@dataclass(frozen=True)
class Diagnostics:
    """How a decision was read (a subset of DecisionDiagnostics)."""

    shifts_read: int
    prior_method: str
    prompts: int
    answer_mass: Optional[float] = None
    temperature: Optional[float] = None
    n_calib: int = 0
    head_version: str = ""
    readout: str = ""
    routed_from: str = ""


@dataclass(frozen=True)
class Decision:
    """One (state, question): a probability per option and the level it was
    served at. `probs` maps each option to its probability, in option order."""

    state_index: int
    question_id: str
    question_key: str
    kind: str
    level: str  # served: "raw" | "L0" | "L1" | "L2"
    probs: Dict[str, float]
    answer: str
    answer_index: int
    confidence: float
    margin: float
    p_true: Optional[float] = None  # noul: probs["Yes"]
    score_value: Optional[float] = None  # score
    diagnostics: Optional[Diagnostics] = None

    @property
    def options(self) -> Tuple[str, ...]:
        return tuple(self.probs)


@dataclass(frozen=True)
class Caller:
    """Who the daemon takes this client for (its token's tenant) and what
    the tenant may do (docs/operations.md, "Tenants and roles")."""

    auth: bool  # False: the daemon runs without auth; every caller may do all
    tenant: str  # "" when auth is off
    role: str  # "decide" | "learn" | "admin"
    priority: str  # the class the info call ran at: "interactive" | "batch"
    default_priority: str  # the tenant's class for calls that ask none
    max_priority: str  # "batch": every call of the tenant runs as batch
    weight: float
    max_queued_calls: int  # 0: the daemon's default
    max_queued_tokens: int


@dataclass(frozen=True)
class ModelInfo:
    """What GetModelInfo says of the served model and the limits in force."""

    name: str
    identity: str
    n_layers: int
    hidden_size: int
    vocab_size: int
    max_choice_k: int
    hidden_states: bool
    server_version: str
    limits: Dict[str, int] = field(default_factory=dict)
    caller: Optional[Caller] = None  # None from a daemon without tenants


@dataclass(frozen=True)
class PromptLogprobs:
    """Log-probabilities at the end of one prompt."""

    label_logprobs: Tuple[float, ...]  # aligned with the label ids asked
    top: Tuple[Tuple[int, float], ...]  # (token id, logprob), most likely first
    n_tokens: int
