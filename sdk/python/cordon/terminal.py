"""A command on a pseudo-terminal in a sandbox, over the API's WebSocket
(GET /v1/sandboxes/{id}/terminal): what it writes comes as it comes, what
is typed is sent to it, and it can be resized and signalled.

The WebSocket (RFC 6455) is spoken here with the standard library only:
binary messages are the terminal's bytes both ways, text messages the
JSON control messages (resize, signal; exit with the outcome, or error).
"""

import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import CordonError, from_answer

__all__ = ["Terminal"]

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# The most one message may hold (the server's own bound on what it reads).
_MAX_MESSAGE = 1 << 20


class Terminal:
    """A command running on a pseudo-terminal in a sandbox.

    >>> term = sandbox.terminal(["sh"], rows=24, cols=80)
    >>> term.write("echo hi; exit\\n")
    >>> result = term.wait(on_data=lambda b: print(b.decode(errors="replace"), end=""))
    """

    def __init__(self, sock: socket.socket, buffered: bytes, sandbox_id: str) -> None:
        self._sock = sock
        self._buf = bytearray(buffered)
        self._sandbox_id = sandbox_id
        self._closed = False

    # -- opening ---------------------------------------------------------

    @classmethod
    def open(cls, base_url: str, token: Optional[str], sandbox_id: str, query: List[Tuple[str, str]],
             timeout: Optional[float]) -> "Terminal":
        u = urllib.parse.urlsplit(base_url)
        tls = u.scheme == "https"
        host = u.hostname or "127.0.0.1"
        port = u.port or (443 if tls else 80)
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            if tls:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
            key = base64.b64encode(os.urandom(16)).decode("ascii")
            path = "%s/v1/sandboxes/%s/terminal?%s" % (u.path.rstrip("/"), urllib.parse.quote(sandbox_id, safe=""),
                                                        urllib.parse.urlencode(query))
            head = [
                "GET %s HTTP/1.1" % path,
                "Host: %s" % u.netloc,
                "Upgrade: websocket",
                "Connection: Upgrade",
                "Sec-WebSocket-Key: %s" % key,
                "Sec-WebSocket-Version: 13",
            ]
            if token:
                head.append("Authorization: Bearer %s" % token)
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            status, headers, rest = _read_head(sock)
            if status != 101:
                raise _refusal(sock, status, headers, rest)
            want = base64.b64encode(hashlib.sha1((key + _GUID).encode("ascii")).digest()).decode("ascii")
            if headers.get("sec-websocket-accept") != want:
                raise CordonError("cordon serve: the terminal's WebSocket answer does not match its key")
            sock.settimeout(None)
            return cls(sock, rest, sandbox_id)
        except BaseException:
            sock.close()
            raise

    # -- sending ---------------------------------------------------------

    def write(self, data: Any) -> None:
        """Sends input (text as UTF-8, or bytes) to the terminal."""
        self._send(0x2, data.encode("utf-8") if isinstance(data, str) else bytes(data))

    def resize(self, rows: int, cols: int) -> None:
        """Changes the terminal's size."""
        self._send(0x1, json.dumps({"type": "resize", "rows": rows, "cols": cols}).encode("utf-8"))

    def signal(self, name: str) -> None:
        """Sends a signal ("SIGINT", "SIGTERM", ...) to the command's
        process group."""
        self._send(0x1, json.dumps({"type": "signal", "signal": name}).encode("utf-8"))

    def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self._sock.sendall(head + mask + masked)

    # -- receiving -------------------------------------------------------

    def wait(self, on_data: Optional[Callable[[bytes], Any]] = None) -> Dict[str, Any]:
        """Reads the terminal until its command ends, giving each piece of
        output to ``on_data`` as it comes; returns the outcome (as cordon
        run reports it: ``status``, ``exit_code``, ``message``, ...). A
        command that could not be run raises the server's error."""
        try:
            while True:
                opcode, payload = self._message()
                if opcode == 0x2:
                    if on_data is not None:
                        on_data(payload)
                    continue
                m = json.loads(payload.decode("utf-8"))
                if m.get("type") == "exit" and isinstance(m.get("outcome"), dict):
                    return m["outcome"]
                if m.get("type") == "error":
                    status = m.get("http_status") if isinstance(m.get("http_status"), int) else 409
                    raise from_answer(status, str(m.get("error", "")), self._sandbox_id)
        finally:
            self.close()

    def close(self) -> None:
        """Ends the terminal (and so its command)."""
        if not self._closed:
            self._closed = True
            try:
                self._send(0x8, struct.pack("!H", 1000))
            except OSError:
                pass
            self._sock.close()

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise CordonError("cordon serve: the terminal ended without an outcome", None, self._sandbox_id)
            self._buf += chunk
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _message(self) -> Tuple[int, bytes]:
        """The next data message (its opcode and payload), answering pings
        and joining fragments."""
        opcode, parts = 0, b""
        while True:
            b0, b1 = self._read(2)
            op, fin, n = b0 & 0x0F, b0 & 0x80, b1 & 0x7F
            if b1 & 0x80:
                raise CordonError("cordon serve: the terminal's WebSocket sent a masked frame")
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            if n > _MAX_MESSAGE or len(parts) + n > _MAX_MESSAGE:
                raise CordonError("cordon serve: a terminal message over %d bytes" % _MAX_MESSAGE)
            payload = self._read(n)
            if op == 0x8:
                raise CordonError("cordon serve: the terminal was closed without an outcome", None, self._sandbox_id)
            if op == 0x9:
                self._send(0xA, payload)
                continue
            if op == 0xA:
                continue
            if op in (0x1, 0x2):
                opcode, parts = op, payload
            elif op == 0x0:
                parts += payload
            if fin:
                return opcode, parts


def _read_head(sock: socket.socket) -> Tuple[int, Dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk or len(data) > 64 << 10:
            raise CordonError("cordon serve: no answer to the terminal's request")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    try:
        status = int(parts[1])
    except (IndexError, ValueError):
        raise CordonError("cordon serve: an answer that is no HTTP: %r" % lines[0][:80]) from None
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, rest


def _refusal(sock: socket.socket, status: int, headers: Dict[str, str], body: bytes) -> CordonError:
    """The server's error of an answer that is not the upgrade."""
    try:
        want = min(int(headers.get("content-length", "0")), 1 << 20)
    except ValueError:
        want = 0
    sock.settimeout(10)
    while len(body) < want:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    try:
        fields = json.loads(body.decode("utf-8"))
    except ValueError:
        fields = {}
    if not isinstance(fields, dict):
        fields = {}
    message = fields.get("error") if isinstance(fields.get("error"), str) else body.decode("utf-8", "replace").strip()
    sandbox = fields.get("sandbox") if isinstance(fields.get("sandbox"), str) else None
    approval = fields.get("approval") if isinstance(fields.get("approval"), str) else None
    return from_answer(status, message, sandbox, approval)
