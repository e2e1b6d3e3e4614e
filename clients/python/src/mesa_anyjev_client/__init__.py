"""mesa-anyjev-client: typed decisions from mesa-anyjevd over gRPC.

    from mesa_anyjev_client import Client
    client = Client("127.0.0.1:50151")
    [d] = client.decide(["A column of species names"], questions=["term.fits"])
    for r in client.decide_stream(read_states("states.jsonl"), ["term.fits"]):
        print(r.index, r.id, r.error or [d.answer for d in r.decisions])
"""
from .client import Client, State
from .errors import (DeadlineExceeded, FailedPrecondition, InvalidArgument, MesaAnyjevError,
                     NotFound, PermissionDenied, ResourceExhausted, Unauthenticated,
                     Unavailable)
from .pipeline import (DecideStream, Progress, RetryPolicy, StateItem, StateResult,
                       read_states)
from .types import Caller, Decision, Diagnostics, ModelInfo, PromptLogprobs, Question

__all__ = ["Client", "State", "Caller", "Decision", "Diagnostics", "ModelInfo",
           "PromptLogprobs", "Question", "MesaAnyjevError", "InvalidArgument", "NotFound",
           "FailedPrecondition", "ResourceExhausted", "Unavailable", "Unauthenticated",
           "PermissionDenied", "DeadlineExceeded",
           "StateItem", "StateResult", "Progress", "RetryPolicy", "DecideStream", "read_states"]
__version__ = "0.1.0"
