"""Errors of mesa-anyjev-client: one exception class per gRPC status the
daemon documents (docs/rpc.md), each naming the status and, where the
daemon's message starts with one, the request field it refuses."""
from __future__ import annotations

import re
from typing import Dict, Optional, Tuple, Type

import grpc

# "states[0].text: ...", "questions[1].options: ...", "ids: ...", and an
# older daemon's request parse "request: states[0].text: invalid UTF-8 ...".
_FIELD = re.compile(r"^(?:request: )?([A-Za-z_]\w*(?:\[\d+\])?(?:\.[A-Za-z_]\w*(?:\[\d+\])?)*): ")


# The trailer the daemon sets on a refusal that waiting can fix (docs/rpc.md,
# "Retry pushback").
PUSHBACK_KEY = "grpc-retry-pushback-ms"


class MesaAnyjevError(Exception):
    """A call the daemon (or gRPC) refused.

    `code` is the grpc.StatusCode name ("INVALID_ARGUMENT"), `field` the
    request field the message names ("states[0].text") or None, `details`
    the daemon's message. str() gives "CODE: details".
    """

    def __init__(self, code: str, details: str, field: Optional[str] = None) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code
        self.details = details
        self.field = field if field is not None else field_of(details)
        # The daemon's grpc-retry-pushback-ms: set on a refusal that waiting
        # can fix (a full queue, loading, draining), None otherwise.
        self.pushback_ms: Optional[int] = None
        # Set by Client.decide_stream on the failure that ends a run: the
        # input positions [start, stop) and the questions [lo, hi) of the
        # call that failed, and how many times it was sent.
        self.span: Optional[Tuple[int, int]] = None
        self.questions: Optional[Tuple[int, int]] = None
        self.attempts: Optional[int] = None


class InvalidArgument(MesaAnyjevError):
    """A request field over a limit or malformed."""


class NotFound(MesaAnyjevError):
    """An unknown question id, bundle version or symbol."""


class FailedPrecondition(MesaAnyjevError):
    """A level that cannot be served now, or a bundle of another model."""


class ResourceExhausted(MesaAnyjevError):
    """A full queue or an oversize message: retry later or split."""


class Unavailable(MesaAnyjevError):
    """The daemon is loading, draining or unreachable: retry."""


class Unauthenticated(MesaAnyjevError):
    """A missing or wrong bearer token."""


class PermissionDenied(MesaAnyjevError):
    """A token whose tenant's role is too small for the method (its message
    names the method, the tenant and the role needed)."""


class DeadlineExceeded(MesaAnyjevError):
    """The call's deadline passed, queued or running."""


_BY_CODE: Dict[grpc.StatusCode, Type[MesaAnyjevError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}


def field_of(details: str) -> Optional[str]:
    """The field a daemon message starts with, or None."""
    match = _FIELD.match(details)
    return match.group(1) if match else None


def from_rpc_error(error: grpc.RpcError) -> MesaAnyjevError:
    """The exception for a failed call (grpc.RpcError is also a grpc.Call)."""
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (error.details() if isinstance(error, grpc.Call) else None) or str(error)
    out = error_for(code.name, details)
    if isinstance(error, grpc.Call):
        for key, value in error.trailing_metadata() or ():
            if key == PUSHBACK_KEY and value.isdigit():
                out.pushback_ms = int(value)
    return out


def error_for(code: str, details: str) -> MesaAnyjevError:
    """The exception for status `code` (a grpc.StatusCode name)."""
    status = getattr(grpc.StatusCode, code, grpc.StatusCode.UNKNOWN)
    return _BY_CODE.get(status, MesaAnyjevError)(code, details)
