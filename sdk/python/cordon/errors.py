"""Errors of the cordon client: the server's refusals, and commands whose
outcome is not ok."""

from typing import Any, Dict, Optional

__all__ = [
    "CordonError",
    "AuthError",
    "NotFound",
    "CommandExitError",
    "LimitExceeded",
]


class CordonError(Exception):
    """An error of cordon serve or of talking to it.

    ``status`` is the HTTP status of the server's answer, when there was one.
    """

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class AuthError(CordonError):
    """The server refused the token: 401 (no valid token) or 403 (not this
    token's to do)."""


class NotFound(CordonError):
    """404: no such sandbox (or not the token's), no such file."""


class CommandExitError(CordonError):
    """A command that ran and did not end with status ``ok``.

    ``result`` is its CommandResult (output, exit code); ``outcome`` the
    outcome as the server reported it (docs/OUTCOME.md), a dict whose
    ``status`` is ``exit_nonzero``, ``signaled``, a limit's, ...
    """

    def __init__(self, result: Any) -> None:
        self.result = result
        self.outcome: Dict[str, Any] = result.outcome
        self.exit_code: int = result.exit_code
        self.stdout: str = result.stdout
        self.stderr: str = result.stderr
        super().__init__(
            "command ended with %s: %s"
            % (self.outcome.get("status"), self.outcome.get("message", ""))
        )

    @property
    def outcome_status(self) -> str:
        """The outcome's status."""
        return str(self.outcome.get("status", ""))


class LimitExceeded(CommandExitError):
    """A command that a limit ended: ``timeout``, ``output_limit``,
    ``memory_limit``, ``pids_limit``, ``cpu_time_limit``, ``file_size_limit``,
    the egress budget, a reviewed workspace's size.

    ``limit`` is the outcome's limit (``{"name": "memory", "value":
    "64MiB"}``), None when it names none.
    """

    @property
    def limit(self) -> Optional[Dict[str, Any]]:
        return self.outcome.get("limit")
