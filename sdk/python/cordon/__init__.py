"""Python client of cordon serve (https://github.com/cordon-sandbox/cordon):
Linux sandboxes for AI agents, with an API shaped like E2B's.

    from cordon import Sandbox, LimitError

    # url from $CORDON_URL (else http://127.0.0.1:8700), token from $CORDON_TOKEN
    with Sandbox.create() as sandbox:
        sandbox.commands.run("make test", on_stdout=print)
        sandbox.files.write("/workspace/in.txt", "data")
"""

from ._http import RetryPolicy
from .aio import AsyncCommands, AsyncFiles, AsyncSandbox
from .errors import (
    ApprovalRequiredError,
    AuthError,
    CommandExitError,
    ConflictError,
    CordonError,
    ForbiddenError,
    LimitError,
    NotFoundError,
    RateLimitError,
    SandboxEndedError,
    TooLargeError,
)
from .terminal import Terminal
from .sandbox import (DEFAULT_URL, LIMIT_STATUSES, CommandHandle, CommandResult, Commands, EntryInfo, Files,
                      FilesystemEvent, Sandbox, WatchHandle)

__all__ = [
    "Sandbox",
    "AsyncSandbox",
    "AsyncCommands",
    "AsyncFiles",
    "Commands",
    "CommandHandle",
    "Files",
    "CommandResult",
    "EntryInfo",
    "FilesystemEvent",
    "WatchHandle",
    "Terminal",
    "RetryPolicy",
    "LIMIT_STATUSES",
    "DEFAULT_URL",
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
