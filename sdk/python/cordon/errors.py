"""Errors of the cordon client: the server's refusals, and commands whose
outcome is not ok. The names, fields and HTTP statuses are the SDKs' one
vocabulary (docs/SDK.md), the same in Go and TypeScript."""

from typing import Any, Dict, Optional

__all__ = [
    "CordonError",
    "AuthError",
    "ForbiddenError",
    "NotFoundError",
    "ConflictError",
    "SandboxEndedError",
    "TooLargeError",
    "ApprovalRequiredError",
    "RateLimitError",
    "CommandExitError",
    "LimitError",
]


class CordonError(Exception):
    """An error of cordon serve or of talking to it.

    ``http_status`` is the HTTP status of the server's answer (None when
    there was none: the server unreachable, a command's outcome);
    ``sandbox_id`` the sandbox the error names, when it names one.
    """

    def __init__(self, message: str, http_status: Optional[int] = None, sandbox_id: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.sandbox_id = sandbox_id


class AuthError(CordonError):
    """401: no valid token."""


class ForbiddenError(CordonError):
    """403: not this token's to do, or a path the sandbox may not write."""


class NotFoundError(CordonError):
    """404: no such sandbox (or not the token's), no such file."""


class ConflictError(CordonError):
    """409: refused in the sandbox's state, or by its policy."""


class SandboxEndedError(CordonError):
    """410: the sandbox has ended."""


class TooLargeError(CordonError):
    """413: a request over the server's bounds (a command's stdin, an
    upload)."""


class ApprovalRequiredError(CordonError):
    """423: the step is held for a person. Send the very same request
    again once ``approval_id`` is approved (cordon approvals)."""

    def __init__(self, message: str, http_status: Optional[int] = None, sandbox_id: Optional[str] = None,
                 approval_id: Optional[str] = None) -> None:
        super().__init__(message, http_status, sandbox_id)
        self.approval_id = approval_id


class RateLimitError(CordonError):
    """429, still, after the retry policy's tries: ``retry_after`` is the
    wait the server asked for last, in seconds."""

    def __init__(self, message: str, http_status: Optional[int] = None, sandbox_id: Optional[str] = None,
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message, http_status, sandbox_id)
        self.retry_after = retry_after


class CommandExitError(CordonError):
    """A command that ran and did not end with status ``ok``.

    ``status`` is the outcome's status (``exit_nonzero``, ``signaled``, a
    limit's, ...), ``exit_code`` the status cordon run would exit with (the
    command's own, 128+N for signal N, 124 for a timeout: README, "Exit
    statuses"), ``outcome`` the whole outcome (docs/OUTCOME.md);
    ``result`` is the CommandResult.
    """

    def __init__(self, result: Any, sandbox_id: Optional[str] = None) -> None:
        self.result = result
        self.outcome: Dict[str, Any] = result.outcome
        self.status: str = result.status
        self.exit_code: int = result.exit_code
        self.stdout: str = result.stdout
        self.stderr: str = result.stderr
        super().__init__("cordon: command ended with %s: %s" % (self.status, self.outcome.get("message", "")), None, sandbox_id)


class LimitError(CommandExitError):
    """A command that a limit ended: ``timeout``, ``output_limit``,
    ``memory_limit``, ``pids_limit``, ``cpu_time_limit``, ``file_size_limit``,
    the egress budget, a reviewed workspace's size.

    ``limit`` is the outcome's limit (``{"name": "memory", "value":
    "64MiB"}``), None when it names none.
    """

    @property
    def limit(self) -> Optional[Dict[str, Any]]:
        return self.outcome.get("limit")


_BY_STATUS = {
    401: AuthError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: SandboxEndedError,
    413: TooLargeError,
    423: ApprovalRequiredError,
    429: RateLimitError,
}


def from_answer(status: int, message: str, sandbox_id: Optional[str] = None, approval_id: Optional[str] = None,
                retry_after: Optional[float] = None) -> CordonError:
    """The error of an answer with HTTP ``status``."""
    cls = _BY_STATUS.get(status, CordonError)
    text = "cordon serve: %d: %s" % (status, message)
    if cls is ApprovalRequiredError:
        return ApprovalRequiredError(text, status, sandbox_id, approval_id)
    if cls is RateLimitError:
        return RateLimitError(text, status, sandbox_id, retry_after)
    return cls(text, status, sandbox_id)
