"""The HTTP side of the client: requests with the token, the server's
errors as exceptions, and requests refused with 429 sent again."""

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from .errors import CordonError, RateLimitError, from_answer

API = "/v1"
# One wait is at most this long, whatever Retry-After says.
_LONGEST_WAIT = 10.0


@dataclass
class RetryPolicy:
    """What the client does with a request refused with 429 (a rate or a
    cap on commands at once: nothing was done): it sends it again, at
    most ``max_retries`` times, each after the wait the server's
    Retry-After asks for (1 s when it says none, at most 10 s), as long as
    the waits add up to at most ``max_wait`` seconds. ``on_retry(attempt,
    wait, error)`` is called before each wait, with the 429's error; then
    RateLimitError is raised. RetryPolicy(max_retries=0) sends nothing
    again."""

    max_retries: int = 3
    max_wait: float = 30.0
    on_retry: Optional[Callable[[int, float, CordonError], Any]] = None


def _error(status: int, body: bytes, retry_after: Optional[float] = None) -> CordonError:
    fields: Dict[str, Any] = {}
    try:
        decoded = json.loads(body.decode("utf-8"))
        if isinstance(decoded, dict):
            fields = decoded
    except ValueError:
        pass
    message = fields.get("error") if isinstance(fields.get("error"), str) else ""
    if not message:
        message = body.decode("utf-8", "replace").strip()
    sandbox = fields.get("sandbox") if isinstance(fields.get("sandbox"), str) else None
    approval = fields.get("approval") if isinstance(fields.get("approval"), str) else None
    return from_answer(status, message, sandbox, approval, retry_after)


def _retry_after(value: Optional[str]) -> float:
    try:
        n = int((value or "").strip())
    except ValueError:
        return 1.0
    return 1.0 if n < 1 else min(float(n), _LONGEST_WAIT)


class Connection:
    """One cordon serve at ``url`` (http://HOST:PORT) with ``token``."""

    def __init__(self, url: str, token: Optional[str], timeout: Optional[float] = 60.0,
                 retry: Optional[RetryPolicy] = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retry = retry if retry is not None else RetryPolicy()

    def open(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        query: Optional[Dict[str, str]] = None,
        timeout: Any = "default",
    ) -> Any:
        """Sends a request and returns the response, whose status is a
        success; the server's refusal is raised. ``timeout`` None waits as
        long as the answer takes (a command's output)."""
        url = self.url + API + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if content_type:
            headers["Content-Type"] = content_type
        wait = self.timeout if timeout == "default" else timeout
        waited = 0.0
        attempt = 0
        while True:
            req = urllib.request.Request(url, data=body, headers=headers, method=method)
            try:
                return urllib.request.urlopen(req, timeout=wait)
            except urllib.error.HTTPError as e:
                data = e.read(1 << 20)
                retry_after = _retry_after(e.headers.get("Retry-After") if e.headers else None)
                e.close()
                err = _error(e.code, data, retry_after if e.code == 429 else None)
                policy = self.retry
                if e.code != 429 or attempt >= policy.max_retries or waited + retry_after > policy.max_wait:
                    if isinstance(err, RateLimitError) and attempt > 0:
                        err.message = "%s (sent %d times over %.0f s)" % (err.message, attempt + 1, waited)
                        err.args = (err.message,)
                    raise err from None
                # Refused before anything was done: sent again once the
                # server says, as the policy allows.
                attempt += 1
                if policy.on_retry is not None:
                    policy.on_retry(attempt, retry_after, err)
                time.sleep(retry_after)
                waited += retry_after
            except urllib.error.URLError as e:
                raise CordonError("cordon serve at %s: %s" % (self.url, e.reason)) from None

    def call(self, method: str, path: str, payload: Any = None, query: Optional[Dict[str, str]] = None) -> Any:
        """Sends payload as JSON (when not None) and returns the decoded
        answer."""
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        with self.open(method, path, body, "application/json", query) as resp:
            data = resp.read()
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError as e:
            raise CordonError("cordon serve: reading the answer to %s %s: %s" % (method, path, e)) from None


def sandbox_path(sandbox_id: str, rest: str = "") -> str:
    return "/sandboxes/" + urllib.parse.quote(sandbox_id, safe="") + rest
