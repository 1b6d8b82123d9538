"""The asynchronous client: AsyncSandbox is Sandbox for asyncio, with the
same methods as coroutines.

    from cordon.aio import AsyncSandbox

    async with await AsyncSandbox.create() as sandbox:
        result = await sandbox.commands.run("make test", on_stdout=print)

Each call runs the synchronous client's in a worker thread
(asyncio.to_thread), so that the event loop never waits on the network;
the output callbacks are called on the event loop's thread, in order.
Errors are the synchronous client's (cordon.errors).
"""

import asyncio
import functools
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ._http import RetryPolicy
from .sandbox import CommandHandle, CommandResult, EntryInfo, FilesystemEvent, Sandbox, WatchHandle
from .terminal import Terminal

__all__ = ["AsyncSandbox", "AsyncCommands", "AsyncCommandHandle", "AsyncFiles", "AsyncWatchHandle"]


async def _run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))


def _on_loop(loop: asyncio.AbstractEventLoop, callback: Optional[Callable[[Any], Any]]) -> Optional[Callable[[Any], Any]]:
    """callback, called on loop's thread (from the worker's)."""
    if callback is None:
        return None
    return lambda text: loop.call_soon_threadsafe(callback, text)


class AsyncSandbox:
    """One sandbox of a cordon serve, for asyncio: Sandbox's methods as
    coroutines. ``sync`` is the synchronous Sandbox underneath."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sync = sandbox
        self.commands = AsyncCommands(sandbox)
        self.files = AsyncFiles(sandbox)

    @property
    def sandbox_id(self) -> str:
        return self.sync.sandbox_id

    @property
    def info(self) -> Dict[str, Any]:
        return self.sync.info

    @classmethod
    async def create(
        cls,
        agent: Optional[str] = None,
        url: Optional[str] = None,
        token: Optional[str] = None,
        request_timeout: Optional[float] = 60.0,
        retry: Optional[RetryPolicy] = None,
        envs: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> "AsyncSandbox":
        """Sandbox.create."""
        return cls(await _run(Sandbox.create, agent, url, token, request_timeout, retry, envs, timeout))

    @classmethod
    async def connect(
        cls,
        sandbox_id: str,
        url: Optional[str] = None,
        token: Optional[str] = None,
        request_timeout: Optional[float] = 60.0,
        retry: Optional[RetryPolicy] = None,
    ) -> "AsyncSandbox":
        """Sandbox.connect."""
        return cls(await _run(Sandbox.connect, sandbox_id, url, token, request_timeout, retry))

    @classmethod
    async def list(
        cls,
        url: Optional[str] = None,
        token: Optional[str] = None,
        request_timeout: Optional[float] = 60.0,
        retry: Optional[RetryPolicy] = None,
    ) -> List[Dict[str, Any]]:
        """Sandbox.list."""
        return await _run(Sandbox.list, url, token, request_timeout, retry)

    async def get_info(self) -> Dict[str, Any]:
        return await _run(self.sync.get_info)

    async def is_running(self) -> bool:
        return await _run(self.sync.is_running)

    async def keep_alive(self) -> Dict[str, Any]:
        return await _run(self.sync.keep_alive)

    async def terminal(
        self,
        cmd: Optional[Union[str, Sequence[str]]] = None,
        rows: int = 24,
        cols: int = 80,
        cwd: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Terminal:
        """Sandbox.terminal: the Terminal it returns is the synchronous
        one (its wait blocks: run it with asyncio.to_thread)."""
        return await _run(self.sync.terminal, cmd, rows, cols, cwd, timeout)

    async def port_url(self, port: int, expires_in: Optional[float] = None) -> str:
        return await _run(self.sync.port_url, port, expires_in)

    async def kill(self) -> None:
        await _run(self.sync.kill)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.sync.info.get("state") == "running":
            await self.kill()


class AsyncCommands:
    """Commands' methods as coroutines."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    async def list(self) -> List[Dict[str, Any]]:
        return await _run(self._sb.commands.list)

    async def connect(self, command_id: str) -> "AsyncCommandHandle":
        return AsyncCommandHandle(self._sb.commands.connect(command_id))

    async def run(
        self,
        cmd: Union[str, Sequence[str]],
        on_stdout: Optional[Callable[[str], Any]] = None,
        on_stderr: Optional[Callable[[str], Any]] = None,
        timeout: Optional[float] = None,
        envs: Optional[Dict[str, str]] = None,
        cwd: Optional[str] = None,
        stdin: Optional[Union[str, bytes]] = None,
        throw_on_error: bool = True,
        background: bool = False,
    ) -> Any:
        """Commands.run; the callbacks are called on the event loop's
        thread. With background, an AsyncCommandHandle."""
        loop = asyncio.get_running_loop()
        result = await _run(
            self._sb.commands.run, cmd, _on_loop(loop, on_stdout), _on_loop(loop, on_stderr),
            timeout, envs, cwd, stdin, throw_on_error, background,
        )
        if isinstance(result, CommandHandle):
            return AsyncCommandHandle(result)
        # The callbacks scheduled by the worker run before the result is
        # handed over.
        await asyncio.sleep(0)
        return result


class AsyncCommandHandle:
    """CommandHandle's methods as coroutines."""

    def __init__(self, handle: CommandHandle) -> None:
        self.sync = handle
        self.id = handle.id
        self.args = handle.args

    async def wait(self, throw_on_error: bool = True) -> CommandResult:
        return await _run(self.sync.wait, throw_on_error)

    async def kill(self) -> Dict[str, Any]:
        return await _run(self.sync.kill)


class AsyncFiles:
    """Files' methods as coroutines."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    async def read(self, path: str, format: str = "text") -> Union[str, bytes]:
        return await _run(self._sb.files.read, path, format)

    async def write(self, path: str, data: Union[str, bytes], mode: Optional[int] = None) -> None:
        await _run(self._sb.files.write, path, data, mode)

    async def list(self, path: str, max: Optional[int] = None) -> List[EntryInfo]:
        return await _run(self._sb.files.list, path, max)

    async def remove(self, path: str) -> None:
        await _run(self._sb.files.remove, path)

    async def rename(self, old_path: str, new_path: str) -> None:
        await _run(self._sb.files.rename, old_path, new_path)

    async def make_dir(self, path: str) -> bool:
        return await _run(self._sb.files.make_dir, path)

    async def get_info(self, path: str) -> EntryInfo:
        return await _run(self._sb.files.get_info, path)

    async def exists(self, path: str) -> bool:
        return await _run(self._sb.files.exists, path)

    async def read_tar(self, path: str) -> bytes:
        return await _run(self._sb.files.read_tar, path)

    async def write_tar(self, path: str, data: bytes) -> Dict[str, Any]:
        return await _run(self._sb.files.write_tar, path, data)

    async def watch_dir(
        self,
        path: str,
        on_event: Optional[Callable[[FilesystemEvent], Any]] = None,
        recursive: bool = False,
        on_exit: Optional[Callable[[Optional[str]], Any]] = None,
    ) -> "AsyncWatchHandle":
        """Files.watch_dir; the callbacks are called on the event loop's
        thread, and the handle is iterated with ``async for``."""
        loop = asyncio.get_running_loop()
        handle = await _run(self._sb.files.watch_dir, path, _on_loop(loop, on_event), recursive, _on_loop(loop, on_exit))
        return AsyncWatchHandle(handle)


class AsyncWatchHandle:
    """WatchHandle for asyncio: ``async for event in handle``."""

    def __init__(self, handle: WatchHandle) -> None:
        self.sync = handle

    @property
    def end_reason(self) -> Optional[str]:
        return self.sync.end_reason

    def get_new_events(self) -> List[FilesystemEvent]:
        return self.sync.get_new_events()

    def __aiter__(self) -> "AsyncWatchHandle":
        return self

    async def __anext__(self) -> FilesystemEvent:
        # A second at a time: a worker thread is never held long by a
        # waiter that was cancelled.
        while True:
            event = await _run(self.sync._next, 1.0)
            if event is None:
                raise StopAsyncIteration
            if isinstance(event, FilesystemEvent):
                return event

    async def stop(self) -> None:
        await _run(self.sync.stop)
