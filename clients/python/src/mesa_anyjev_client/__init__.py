"""mesa-anyjev-client: typed decisions from mesa-anyjevd over gRPC.

    from mesa_anyjev_client import Client
    client = Client("127.0.0.1:50151")
    [d] = client.decide(["A column of species names"], questions=["term.fits"])
"""
from .client import Client, State
from .errors import (DeadlineExceeded, FailedPrecondition, InvalidArgument, MesaAnyjevError,
                     NotFound, ResourceExhausted, Unauthenticated, Unavailable)
from .types import Decision, Diagnostics, ModelInfo, PromptLogprobs, Question

__all__ = ["Client", "State", "Decision", "Diagnostics", "ModelInfo", "PromptLogprobs",
           "Question", "MesaAnyjevError", "InvalidArgument", "NotFound", "FailedPrecondition",
           "ResourceExhausted", "Unavailable", "Unauthenticated", "DeadlineExceeded"]
__version__ = "0.1.0"
