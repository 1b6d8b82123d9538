"""Sandboxes of cordon serve, shaped like E2B's SDK: create one, run
commands with their output streamed, move files, keep it alive, kill it."""

import base64
import collections
import datetime
import json
import os
import socket
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ._http import Connection, RetryPolicy, sandbox_path
from .terminal import Terminal
from .errors import CommandExitError, CordonError, LimitError, NotFoundError, SandboxEndedError, from_answer

__all__ = ["Sandbox", "Commands", "CommandHandle", "Files", "CommandResult", "EntryInfo", "FilesystemEvent", "WatchHandle",
           "LIMIT_STATUSES", "DEFAULT_URL"]

DEFAULT_URL = "http://127.0.0.1:8700"

# The statuses of a command that a limit ended.
LIMIT_STATUSES = frozenset(
    {
        "timeout",
        "output_limit",
        "memory_limit",
        "pids_limit",
        "cpu_time_limit",
        "file_size_limit",
        "egress_budget",
        "egress_denied",
        "workspace_size_limit",
        "workspace_inodes_limit",
        "cache_size_limit",
    }
)


@dataclass
class CommandResult:
    """A command's output and how it ended. ``status`` is the outcome's
    status (``ok``, ``exit_nonzero``, a limit's, ...); ``exit_code`` the
    status cordon run would exit with: the command's own when it exited,
    128+N when signal N killed it, 124 for a timeout and another of 114-123
    for another limit (README, "Exit statuses"); ``outcome`` the outcome as
    cordon run reports it (docs/OUTCOME.md)."""

    stdout: str
    stderr: str
    exit_code: int
    status: str
    outcome: Dict[str, Any]
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""


@dataclass
class EntryInfo:
    """One entry of a directory: ``type`` is "file", "dir", "symlink" or
    "other"; ``mode`` the permission bits (0o644); ``symlink_target`` a
    symlink's target, None for another type."""

    name: str
    type: str
    path: str
    size: int
    mode: int
    modified_time: Optional[datetime.datetime]
    symlink_target: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


class Sandbox:
    """One sandbox of a cordon serve.

    >>> sandbox = Sandbox.create()  # $CORDON_URL and $CORDON_TOKEN, or url=, token=
    >>> result = sandbox.commands.run("echo hi", on_stdout=print)
    >>> sandbox.kill()
    """

    def __init__(self, info: Dict[str, Any], connection: Connection) -> None:
        self.info = info
        self._conn = connection
        self.commands = Commands(self)
        self.files = Files(self)

    @property
    def sandbox_id(self) -> str:
        return str(self.info["id"])

    @classmethod
    def create(
        cls,
        agent: Optional[str] = None,
        url: Optional[str] = None,
        token: Optional[str] = None,
        request_timeout: Optional[float] = 60.0,
        retry: Optional[RetryPolicy] = None,
        envs: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> "Sandbox":
        """Claims a sandbox of ``agent`` (None: the token's own) from the
        server at ``url`` (default $CORDON_URL, else http://127.0.0.1:8700)
        with ``token`` (default $CORDON_TOKEN); ``retry`` is what is done
        with requests refused for their rate (default RetryPolicy()).

        ``envs`` is set for every command of the sandbox (a command's own
        ``envs`` win); ``timeout`` (seconds) ends the sandbox, at most the
        agent's max_lifetime, which holds without it."""
        conn = _connection(url, token, request_timeout, retry)
        payload: Dict[str, Any] = {}
        if agent:
            payload["agent"] = agent
        if envs:
            payload["env"] = dict(envs)
        if timeout is not None:
            payload["timeout"] = _duration(timeout)
        return cls(conn.call("POST", "/sandboxes", payload), conn)

    @classmethod
    def connect(
        cls,
        sandbox_id: str,
        url: Optional[str] = None,
        token: Optional[str] = None,
        request_timeout: Optional[float] = 60.0,
        retry: Optional[RetryPolicy] = None,
    ) -> "Sandbox":
        """The sandbox ``sandbox_id``, created earlier, as the server
        describes it now."""
        conn = _connection(url, token, request_timeout, retry)
        return cls(conn.call("GET", sandbox_path(sandbox_id)), conn)

    @classmethod
    def list(
        cls,
        url: Optional[str] = None,
        token: Optional[str] = None,
        request_timeout: Optional[float] = 60.0,
        retry: Optional[RetryPolicy] = None,
    ) -> List[Dict[str, Any]]:
        """The sandboxes the token may see, as the server describes them."""
        listing = _connection(url, token, request_timeout, retry).call("GET", "/sandboxes")
        return list(listing) if isinstance(listing, list) else []

    def get_info(self) -> Dict[str, Any]:
        """How the sandbox is now: its state, why it ended, its timeouts."""
        self.info = self._conn.call("GET", sandbox_path(self.sandbox_id))
        return self.info

    def is_running(self) -> bool:
        """Whether the sandbox still runs (False too when it is gone)."""
        try:
            return self.get_info().get("state") == "running"
        except (NotFoundError, SandboxEndedError):
            return False

    def keep_alive(self) -> Dict[str, Any]:
        """Restarts the sandbox's idle timeout (the server's idle_timeout;
        its max_lifetime still holds)."""
        self.info = self._conn.call("POST", sandbox_path(self.sandbox_id, "/keepalive"))
        return self.info

    def terminal(
        self,
        cmd: Optional[Union[str, Sequence[str]]] = None,
        rows: int = 24,
        cols: int = 80,
        cwd: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Terminal:
        """Starts ``cmd`` (a string, with sh -c; an argv; None: the
        server's shell) on a pseudo-terminal of ``rows`` x ``cols`` in the
        sandbox, and returns the Terminal: write to it, resize or signal
        it, and wait() for its outcome with its output as it comes.
        ``timeout`` (seconds) ends the command, at most the profile's wall
        limit."""
        query: List[Tuple[str, str]] = []
        if cmd is not None:
            args = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
            query += [("arg", a) for a in args]
        query += [("rows", str(rows)), ("cols", str(cols))]
        if cwd:
            query.append(("dir", cwd))
        if timeout is not None:
            query.append(("timeout", _duration(timeout)))
        return Terminal.open(self._conn.url, self._conn.token, self.sandbox_id, query, self._conn.timeout)

    def port_url(self, port: int, expires_in: Optional[float] = None) -> str:
        """A URL that opens ``port`` of the sandbox in a browser (no token
        needed) for ``expires_in`` seconds (default 15 minutes; at most an
        hour, never past the sandbox's end)."""
        payload: Dict[str, Any] = {"port": port}
        if expires_in is not None:
            payload["expires_in"] = _duration(expires_in)
        answer = self._conn.call("POST", sandbox_path(self.sandbox_id, "/port-urls"), payload)
        return self._conn.url + answer["path"]

    def kill(self) -> None:
        """Ends the sandbox and everything in it."""
        self.info = self._conn.call("DELETE", sandbox_path(self.sandbox_id))

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.info.get("state") == "running":
            self.kill()


def _connection(url: Optional[str], token: Optional[str], timeout: Optional[float],
                retry: Optional[RetryPolicy] = None) -> Connection:
    return Connection(
        url or os.environ.get("CORDON_URL") or DEFAULT_URL,
        token if token is not None else os.environ.get("CORDON_TOKEN"),
        timeout,
        retry,
    )


def _time(value: Any) -> Optional[datetime.datetime]:
    """An RFC 3339 time of the API, None when there is none."""
    if not isinstance(value, str) or not value:
        return None
    # fromisoformat before 3.11 takes neither Z nor nanoseconds.
    text = value.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        frac = "".join(ch for ch in rest if ch.isdigit())
        text = head + "." + frac[:6].ljust(6, "0") + rest[len(frac):]
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


def _duration(seconds: float) -> str:
    return "%dms" % max(1, int(round(seconds * 1000)))


class CommandHandle:
    """A command running in the background in a sandbox
    (``commands.run(..., background=True)``): ``wait()`` for its result,
    or ``kill()`` it."""

    def __init__(self, sandbox: "Sandbox", command_id: str, args: Optional[List[str]] = None) -> None:
        self._sb = sandbox
        self.id = command_id
        self.args = args or []

    def wait(self, throw_on_error: bool = True) -> "CommandResult":
        """Waits for the command to end and returns its result, as
        ``commands.run`` does (CommandExitError, LimitError)."""
        conn = self._sb._conn
        path = sandbox_path(self._sb.sandbox_id, "/commands/" + urllib.parse.quote(self.id, safe=""))
        while True:
            with conn.open("GET", path, query={"wait": "1"}, timeout=None) as resp:
                answer = json.loads(resp.read().decode("utf-8"))
            if "id" not in answer:
                break  # the result; a description is a wait given up: again
        return _result(answer.get("outcome") or {}, base64.b64decode(answer.get("stdout") or ""),
                       base64.b64decode(answer.get("stderr") or ""), throw_on_error, self._sb.sandbox_id)

    def kill(self) -> Dict[str, Any]:
        """Ends the command (its process group); returns how it is."""
        path = sandbox_path(self._sb.sandbox_id, "/commands/" + urllib.parse.quote(self.id, safe="") + "/kill")
        answer: Dict[str, Any] = self._sb._conn.call("POST", path)
        return answer


class Commands:
    """Runs commands in a sandbox."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def list(self) -> List[Dict[str, Any]]:
        """The sandbox's background commands (id, args, state, outcome once
        ended), oldest first."""
        answer = self._sb._conn.call("GET", sandbox_path(self._sb.sandbox_id, "/commands"))
        return list(answer) if isinstance(answer, list) else []

    def connect(self, command_id: str) -> CommandHandle:
        """The background command ``command_id``, started earlier."""
        return CommandHandle(self._sb, command_id)

    def run(
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
        """Runs ``cmd`` (a string, with sh -c; or an argv, as it is), its
        output given to ``on_stdout`` and ``on_stderr`` as it comes, and
        returns its result.

        ``timeout`` (seconds) ends the command, at most the profile's wall
        limit, which holds without it. A command that does not end with
        status ok raises CommandExitError, or LimitError when a limit
        ended it; each carries the result and the outcome. With
        ``throw_on_error=False`` the result is returned whatever its status.

        With ``background=True`` it returns a CommandHandle as soon as the
        command started (the callbacks are not used: ``wait()`` gives the
        output); the command runs on until it ends, is killed, or the
        sandbox ends.
        """
        args = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        payload: Dict[str, Any] = {"args": args, "stream": True}
        if envs:
            payload["env"] = dict(envs)
        if cwd:
            payload["dir"] = cwd
        if stdin:
            raw = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
            payload["stdin"] = base64.b64encode(raw).decode("ascii")
        if timeout is not None:
            payload["timeout"] = _duration(timeout)
        conn = self._sb._conn
        if background:
            del payload["stream"]
            payload["background"] = True
            started = conn.call("POST", sandbox_path(self._sb.sandbox_id, "/exec"), payload)
            return CommandHandle(self._sb, started["id"], started.get("args"))
        out: List[bytes] = []
        err: List[bytes] = []
        outcome: Optional[Dict[str, Any]] = None
        body = json.dumps(payload).encode("utf-8")
        with conn.open(
            "POST", sandbox_path(self._sb.sandbox_id, "/exec"), body, "application/json", timeout=None
        ) as resp:
            for line in resp:
                if not line.strip():
                    continue
                try:
                    ev = json.loads(line.decode("utf-8"))
                except ValueError as e:
                    raise CordonError("cordon serve: reading the output: %s" % e) from None
                if "outcome" in ev:
                    outcome = ev["outcome"]
                    break
                if ev.get("error"):
                    # The command could not be run after all: the error the
                    # same request without stream would have had.
                    status = ev.get("http_status")
                    if isinstance(status, int):
                        raise from_answer(status, ev["error"], self._sb.sandbox_id)
                    raise CordonError("cordon serve: %s" % ev["error"], None, self._sb.sandbox_id)
                for key, chunks, callback in (("stdout", out, on_stdout), ("stderr", err, on_stderr)):
                    if ev.get(key):
                        data = base64.b64decode(ev[key])
                        chunks.append(data)
                        if callback is not None:
                            text = ev.get(key + "_text")
                            callback(text if text is not None else data.decode("utf-8", "replace"))
        if outcome is None:
            raise CordonError("cordon serve: the output ended without an outcome")
        return _result(outcome, b"".join(out), b"".join(err), throw_on_error, self._sb.sandbox_id)


def _result(outcome: Dict[str, Any], stdout: bytes, stderr: bytes, throw_on_error: bool, sandbox_id: str) -> CommandResult:
    """A command's result; raised as CommandExitError or LimitError when
    its status is not ok, unless throw_on_error is False."""
    code = outcome.get("exit_code")
    status = str(outcome.get("status", ""))
    result = CommandResult(
        stdout=stdout.decode("utf-8", "replace"),
        stderr=stderr.decode("utf-8", "replace"),
        exit_code=code if isinstance(code, int) else -1,
        status=status,
        outcome=outcome,
        stdout_bytes=stdout,
        stderr_bytes=stderr,
    )
    if status == "ok" or not throw_on_error:
        return result
    if outcome.get("limit") or status in LIMIT_STATUSES:
        raise LimitError(result, sandbox_id)
    raise CommandExitError(result, sandbox_id)


class Files:
    """Moves files in and out of a sandbox."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def read(self, path: str, format: str = "text") -> Union[str, bytes]:
        """The content of the file at ``path`` inside the sandbox: text
        (UTF-8) by default, bytes with format="bytes"."""
        if format not in ("text", "bytes"):
            raise ValueError('format: want "text" or "bytes", found %r' % (format,))
        conn = self._sb._conn
        with conn.open("GET", sandbox_path(self._sb.sandbox_id, "/files"), query={"path": path}, timeout=None) as resp:
            data = resp.read()
        return data.decode("utf-8") if format == "text" else data

    def write(self, path: str, data: Union[str, bytes], mode: Optional[int] = None) -> None:
        """Writes ``data`` (text as UTF-8) to the file at ``path`` inside
        the sandbox, replacing what it held; created with ``mode`` (default
        0o644)."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        query = {"path": path}
        if mode is not None:
            query["mode"] = "%o" % mode
        conn = self._sb._conn
        with conn.open(
            "PUT", sandbox_path(self._sb.sandbox_id, "/files"), raw, "application/octet-stream", query, timeout=None
        ) as resp:
            resp.read()

    def read_tar(self, path: str) -> bytes:
        """The directory at ``path`` inside the sandbox as a tar archive
        (links as links, never followed). An archive the server cut short
        (its end marker missing) raises CordonError."""
        conn = self._sb._conn
        with conn.open("GET", sandbox_path(self._sb.sandbox_id, "/files/tar"), query={"path": path}, timeout=None) as resp:
            data = resp.read()
        if not _tar_complete(data):
            raise CordonError("cordon serve: the archive of %s was cut short (%d bytes, no end marker)" % (path, len(data)),
                              None, self._sb.sandbox_id)
        return data

    def write_tar(self, path: str, data: bytes) -> Dict[str, Any]:
        """Extracts the tar archive ``data`` into the directory at ``path``
        inside the sandbox (which must exist), as its user, under its
        rules; returns what was extracted (entries, bytes)."""
        conn = self._sb._conn
        with conn.open("PUT", sandbox_path(self._sb.sandbox_id, "/files/tar"), bytes(data), "application/x-tar",
                       {"path": path}, timeout=None) as resp:
            answer: Dict[str, Any] = json.loads(resp.read().decode("utf-8"))
        return answer

    def remove(self, path: str) -> None:
        """Removes the file, link or directory (with everything in it) at
        ``path`` inside the sandbox."""
        self._sb._conn.call("DELETE", sandbox_path(self._sb.sandbox_id, "/files"), query={"path": path, "recursive": "1"})

    def rename(self, old_path: str, new_path: str) -> None:
        """Renames the entry at ``old_path`` to ``new_path``, inside the
        sandbox."""
        self._sb._conn.call("POST", sandbox_path(self._sb.sandbox_id, "/files/rename"), query={"path": old_path, "to": new_path})

    def make_dir(self, path: str) -> bool:
        """Makes the directory at ``path`` inside the sandbox, with its
        parents; False when it was there already."""
        answer = self._sb._conn.call("POST", sandbox_path(self._sb.sandbox_id, "/files/mkdir"), query={"path": path})
        return bool(answer.get("created"))

    def get_info(self, path: str) -> EntryInfo:
        """Describes the entry at ``path`` inside the sandbox (a link not
        followed); NotFoundError when there is none."""
        e = self._sb._conn.call("GET", sandbox_path(self._sb.sandbox_id, "/files/stat"), query={"path": path})
        return _entry(e.get("path", path), e)

    def exists(self, path: str) -> bool:
        """Whether there is an entry at ``path`` inside the sandbox."""
        try:
            self.get_info(path)
        except NotFoundError:
            return False
        return True

    def watch_dir(
        self,
        path: str,
        on_event: Optional[Callable[["FilesystemEvent"], Any]] = None,
        recursive: bool = False,
        on_exit: Optional[Callable[[Optional[str]], Any]] = None,
    ) -> "WatchHandle":
        """Watches the directory at ``path`` inside the sandbox (and its
        subdirectories, with ``recursive``; links are not followed) and
        returns once the watch is in place. Each change is passed to
        ``on_event`` (on a thread of the handle's), and kept for
        ``get_new_events`` or iteration; ``on_exit`` is called with why
        the server ended the watch (None when it was stopped here)."""
        query = {"path": path}
        if recursive:
            query["recursive"] = "1"
        resp = self._sb._conn.open("GET", sandbox_path(self._sb.sandbox_id, "/files/watch"), query=query, timeout=None)
        return WatchHandle(resp, on_event, on_exit)

    def list(self, path: str, max: Optional[int] = None) -> List[EntryInfo]:
        """The entries of the directory at ``path`` inside the sandbox,
        sorted by name: at most ``max`` (default the server's, 1000)."""
        query = {"path": path}
        if max:
            query["max"] = str(max)
        listing = self._sb._conn.call("GET", sandbox_path(self._sb.sandbox_id, "/files/list"), query=query)
        base = listing.get("path", path).rstrip("/")
        return [_entry(base + "/" + e["name"], e) for e in listing.get("entries") or []]


@dataclass
class FilesystemEvent:
    """A change under a watched directory. ``type`` is "create", "write",
    "remove", "rename" (moved away, under its old name), "chmod" or
    "overflow" (events were lost: list the directory again); ``name`` the
    entry's path relative to the directory ("" for the directory
    itself)."""

    type: str
    name: str = ""
    is_dir: bool = False


class WatchHandle:
    """A watch of a directory of a sandbox (Files.watch_dir): iterate it
    for the changes as they come, or take those that came with
    get_new_events; ``end_reason`` says why the server ended it (or why
    this client refused what it sent: a line over 1 MiB). At most
    10,000 changes wait to be taken; past that, one "overflow" stands for
    those dropped."""

    def __init__(self, resp: Any, on_event: Optional[Callable[[FilesystemEvent], Any]],
                 on_exit: Optional[Callable[[Optional[str]], Any]]) -> None:
        self.end_reason: Optional[str] = None
        self._resp = resp
        self._on_event = on_event
        self._on_exit = on_exit
        self._cond = threading.Condition()
        self._pending: "collections.deque[FilesystemEvent]" = collections.deque()
        self._dropping = False
        self._ended = False
        self._thread = threading.Thread(target=self._read, name="cordon-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                line = self._resp.readline(_MAX_WATCH_LINE)
                if not line:
                    break
                if len(line) == _MAX_WATCH_LINE and not line.endswith(b"\n"):
                    self.end_reason = "cordon: the server sent a line of more than %d bytes; the watch was ended" % _MAX_WATCH_LINE
                    break
                e = json.loads(line.decode("utf-8"))
                if not isinstance(e, dict):
                    self.end_reason = "cordon: the server sent a line that is no event; the watch was ended"
                    break
                if e.get("type") == "end":
                    self.end_reason = e.get("reason")
                    break
                name = e.get("name", "")
                if e.get("name_base64"):
                    name = base64.b64decode(e["name_base64"]).decode("utf-8", "surrogateescape")
                event = FilesystemEvent(e.get("type", ""), name, bool(e.get("dir")))
                self._keep(event)
                if self._on_event is not None:
                    self._on_event(event)
        except (OSError, ValueError):
            pass  # stopped here, or the connection was lost
        finally:
            self._resp.close()
            with self._cond:
                self._ended = True
                self._cond.notify_all()
            if self._on_exit is not None:
                self._on_exit(self.end_reason)

    def _keep(self, event: FilesystemEvent) -> None:
        with self._cond:
            if len(self._pending) >= _KEEP_EVENTS:
                if not self._dropping:
                    self._dropping = True
                    self._pending.append(FilesystemEvent("overflow"))
                return
            self._dropping = False
            self._pending.append(event)
            self._cond.notify_all()

    def _next(self, timeout: Optional[float] = None) -> Any:
        """The next change, waiting for it; None once the watch ended,
        _WAITED when ``timeout`` passed first."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._pending or self._ended, timeout):
                return _WAITED
            return self._pending.popleft() if self._pending else None

    def get_new_events(self) -> List[FilesystemEvent]:
        """The changes that came since the last call, without waiting."""
        with self._cond:
            out = list(self._pending)
            self._pending.clear()
            return out

    def __iter__(self) -> Any:
        while True:
            event = self._next()
            if event is None:
                return
            yield event

    def stop(self) -> None:
        """Ends the watch, and waits until its thread has."""
        try:
            self._resp.fp.raw._sock.shutdown(socket.SHUT_RDWR)
        except (AttributeError, OSError):
            pass
        self._thread.join(30)


# _KEEP_EVENTS bounds the changes a WatchHandle keeps untaken.
_KEEP_EVENTS = 10000

# _MAX_WATCH_LINE bounds a line of a watch (the server's are at most 64 KiB).
_MAX_WATCH_LINE = 1 << 20

# _WAITED is what WatchHandle._next returns when its timeout passed.
_WAITED = object()


def _tar_complete(data: bytes) -> bool:
    """Whether ``data`` is a whole tar archive: header by header, each
    member's blocks, to the end marker (two zero blocks) where a header
    would be. A cut at any block boundary is told apart, a zero block
    inside a member's content included."""
    pos = 0
    while pos + 512 <= len(data):
        block = data[pos:pos + 512]
        if block == bytes(512):
            return data[pos + 512:pos + 1024] == bytes(512)
        field = block[124:136]
        if field[0] & 0x80:  # base-256
            size = int.from_bytes(field[1:], "big")
        else:
            try:
                size = int(field.split(b"\0", 1)[0].strip() or b"0", 8)
            except ValueError:
                return False
        pos += 512 + (size + 511) // 512 * 512
    return False


def _entry(path: str, e: Dict[str, Any]) -> EntryInfo:
    """An entry of the API (a listing's, or stat's) at ``path``."""
    return EntryInfo(
        name=e["name"],
        type=e["type"],
        path=path,
        size=e.get("size", 0),
        mode=int(e.get("mode") or "0", 8),
        modified_time=_time(e.get("modified")),
        symlink_target=e.get("target"),
        raw=e,
    )
