"""The Python client against a real cordon serve, started here: from
$CORDON_BIN, or built with go from this repository. Skipped when neither
can be had, or when this host cannot run cordon sandboxes."""

import asyncio
import hashlib
import inspect
import io
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

from cordon import (
    Commands,
    Files,
    AuthError,
    CommandExitError,
    ForbiddenError,
    LimitError,
    NotFoundError,
    SandboxEndedError,
    Sandbox,
    TooLargeError,
)

from cordon.aio import AsyncCommands, AsyncFiles, AsyncSandbox

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))

# The agent's profile: the system's tools, a private workspace, and an
# output limit that a test reaches.
PROFILE = """version: 1
agent: py
workspace:
  path: .
  writable: true
mounts:
  - path: /usr
  - path: /bin
  - path: /lib
  - path: /lib64
    optional: true
env:
  set:
    PATH: /usr/bin:/bin
resources:
  wall: 30s
  output: 4KiB
"""


def _cordon(tmp: str) -> str:
    binary = os.environ.get("CORDON_BIN")
    if binary:
        return binary
    if shutil.which("go") is None:
        raise unittest.SkipTest("neither $CORDON_BIN nor go to build cordon")
    binary = os.path.join(tmp, "cordon")
    env = dict(os.environ, CGO_ENABLED="0")
    subprocess.run(["go", "build", "-o", binary, "./cmd/cordon"], cwd=REPO, env=env, check=True)
    return binary


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeTest(unittest.TestCase):
    """Starts one cordon serve for the tests of the class."""

    tmp = ""
    proc = None  # type: subprocess.Popen
    url = ""
    token = ""

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.mkdtemp(prefix="cordon-py-")
        os.chmod(cls.tmp, 0o755)
        try:
            cls._start()
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def _start(cls) -> None:
        binary = _cordon(cls.tmp)
        doctor = subprocess.run([binary, "doctor"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if doctor.returncode != 0:
            raise unittest.SkipTest("this host cannot run cordon sandboxes: " + doctor.stdout.decode(errors="replace")[-500:])
        cls.token = "cordon_" + secrets.token_hex(16)
        digest = hashlib.sha256(cls.token.encode()).hexdigest()
        with open(os.path.join(cls.tmp, "py.yaml"), "w") as f:
            f.write(PROFILE)
        with open(os.path.join(cls.tmp, "serve.yaml"), "w") as f:
            f.write(
                "agents:\n  py:\n    profile: py.yaml\n    pool: 1\n"
                "tokens:\n  - name: py-token\n    agent: py\n    sha256: %s\n" % digest
            )
        port = _free_port()
        cls.url = "http://127.0.0.1:%d" % port
        env = dict(
            os.environ,
            CORDON_STATE_DIR=os.path.join(cls.tmp, "state"),
            CORDON_AUDIT_LOG=os.path.join(cls.tmp, "audit.jsonl"),
            HOME=cls.tmp,
        )
        cls.log = open(os.path.join(cls.tmp, "serve.log"), "wb")
        cls.proc = subprocess.Popen(
            [binary, "serve", "--config", os.path.join(cls.tmp, "serve.yaml"), "--listen", "127.0.0.1:%d" % port],
            cwd=cls.tmp,
            env=env,
            stdout=cls.log,
            stderr=subprocess.STDOUT,
        )
        for _ in range(600):  # 30s
            if cls.proc.poll() is not None:
                raise RuntimeError("cordon serve ended: " + cls._log())
            try:
                with urllib.request.urlopen(cls.url + "/v1/health", timeout=5) as r:
                    if json.load(r).get("status"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        cls._stop()
        raise RuntimeError("cordon serve did not answer in 30s: " + cls._log())

    @classmethod
    def _log(cls) -> str:
        with open(os.path.join(cls.tmp, "serve.log"), "rb") as f:
            return f.read().decode(errors="replace")[-2000:]

    @classmethod
    def _stop(cls) -> None:
        if cls.proc is not None and cls.proc.poll() is None:
            cls.proc.send_signal(signal.SIGTERM)
            try:
                cls.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
                cls.proc.wait()
        cls.log.close()

    @classmethod
    def tearDownClass(cls) -> None:
        cls._stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def sandbox(self) -> Sandbox:
        sb = Sandbox.create(url=self.url, token=self.token)
        self.addCleanup(lambda: sb.kill() if sb.info.get("state") == "running" else None)
        return sb


class SandboxTest(ServeTest):
    def test_run_streams_output(self) -> None:
        sb = self.sandbox()
        self.assertEqual(sb.info["state"], "running")
        self.assertEqual(sb.info["agent"], "py")
        out, err = [], []
        res = sb.commands.run(
            "echo one; echo warn >&2; printf 'h\\303\\251\\n'; pwd",
            on_stdout=out.append,
            on_stderr=err.append,
        )
        self.assertEqual("".join(out), "one\nh\u00e9\n/workspace\n")
        self.assertEqual("".join(err), "warn\n")
        self.assertEqual(res.stdout, "one\nh\u00e9\n/workspace\n")
        self.assertEqual(res.stderr_bytes, b"warn\n")
        self.assertEqual(res.exit_code, 0)
        self.assertEqual((res.status, res.outcome["status"]), ("ok", "ok"))
        # An argv runs as it is; env, cwd and stdin reach it.
        res = sb.commands.run(["sh", "-c", 'cat; echo " $X"; pwd'], envs={"X": "y"}, cwd="/tmp", stdin="in")
        self.assertEqual(res.stdout, "in y\n/tmp\n")

    def test_files(self) -> None:
        sb = self.sandbox()
        sb.commands.run("mkdir /workspace/d")
        sb.files.write("/workspace/d/a.txt", "caf\u00e9\n")
        sb.files.write("/workspace/d/b.bin", b"\x00\xff", mode=0o600)
        self.assertEqual(sb.files.read("/workspace/d/a.txt"), "caf\u00e9\n")
        self.assertEqual(sb.files.read("/workspace/d/b.bin", format="bytes"), b"\x00\xff")
        self.assertEqual(sb.commands.run("cat /workspace/d/a.txt").stdout, "caf\u00e9\n")
        entries = sb.files.list("/workspace/d")
        self.assertEqual([(e.name, e.type, e.size, e.path) for e in entries],
                         [("a.txt", "file", 6, "/workspace/d/a.txt"), ("b.bin", "file", 2, "/workspace/d/b.bin")])
        self.assertEqual(entries[1].mode, 0o600)
        self.assertIsNotNone(entries[1].modified_time)
        self.assertIsNone(entries[1].symlink_target)
        with self.assertRaises(NotFoundError):
            sb.files.read("/workspace/d/missing")
        # Names: made, described, renamed, removed, as a command then sees them.
        self.assertTrue(sb.files.make_dir("/workspace/out/deep"))
        self.assertFalse(sb.files.make_dir("/workspace/out/deep"))
        self.assertTrue(sb.files.exists("/workspace/out/deep"))
        self.assertFalse(sb.files.exists("/workspace/out/none"))
        sb.files.rename("/workspace/d/a.txt", "/workspace/out/deep/b.txt")
        info = sb.files.get_info("/workspace/out/deep/b.txt")
        self.assertEqual((info.name, info.path, info.type, info.size), ("b.txt", "/workspace/out/deep/b.txt", "file", 6))
        with self.assertRaises(NotFoundError):
            sb.files.get_info("/workspace/d/a.txt")
        sb.files.remove("/workspace/out")
        self.assertEqual(sb.commands.run("ls /workspace").stdout, "d\n")
        # A directory out as a tar archive, and into another.
        data = sb.files.read_tar("/workspace/d")
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            self.assertEqual(sorted(m.name for m in tf.getmembers() if m.isfile()), ["b.bin"])
        sb.files.make_dir("/workspace/copy")
        self.assertEqual(sb.files.write_tar("/workspace/copy", data)["entries"], len(tarfile.open(fileobj=io.BytesIO(data)).getmembers()))
        self.assertEqual(sb.files.read("/workspace/copy/b.bin", format="bytes"), b"\x00\xff")
        # A path the sandbox may not write is refused as a command would be.
        with self.assertRaises(ForbiddenError) as cm:
            sb.files.make_dir("/usr/cordon-test")
        self.assertEqual(cm.exception.http_status, 403)

    def test_watch_dir(self) -> None:
        sb = self.sandbox()
        sb.files.make_dir("/workspace/w")
        seen = []
        exited = threading.Event()
        handle = sb.files.watch_dir("/workspace/w", on_event=seen.append, recursive=True, on_exit=lambda r: exited.set())
        # In place when it returns: what a command does next is seen; a
        # new directory is watched once its event came.
        got = []
        for cmd, want in (
            ("mkdir /workspace/w/x", [("create", "x", True)]),
            ("echo hi > /workspace/w/x/f && mv /workspace/w/x/f /workspace/w/g",
             [("create", "x/f", False), ("rename", "x/f", False), ("create", "g", False)]),
        ):
            sb.commands.run(cmd)
            for event in handle:
                got.append((event.type, event.name, event.is_dir))
                if [w for w in want if w in got] == want:
                    break
            self.assertEqual([w for w in want if w in got], want, got)
        # Removing the directory ends the watch, with the reason.
        sb.files.remove("/workspace/w")
        rest = list(handle)
        self.assertIn(("remove", "", True), [(e.type, e.name, e.is_dir) for e in rest])
        self.assertEqual(handle.end_reason, "/workspace/w was removed or moved")
        self.assertTrue(exited.wait(10))
        self.assertEqual([e.type for e in seen][:2], ["create", "create"])
        # Stopped here: no reason, and the handle's thread ends.
        sb.files.make_dir("/workspace/w2")
        handle = sb.files.watch_dir("/workspace/w2")
        handle.stop()
        self.assertEqual(list(handle), [])
        self.assertIsNone(handle.end_reason)
        with self.assertRaises(NotFoundError):
            sb.files.watch_dir("/workspace/none")

    def test_limits_and_failures_are_typed(self) -> None:
        sb = self.sandbox()
        # The profile's output limit (4 KiB) ends the command: LimitError,
        # with the outcome; the sandbox goes on.
        with self.assertRaises(LimitError) as cm:
            sb.commands.run("yes | head -c 100000")
        self.assertEqual((cm.exception.status, cm.exception.exit_code), ("output_limit", 123))
        self.assertEqual(cm.exception.limit["name"], "output")
        self.assertLessEqual(len(cm.exception.stdout), 8 << 10)
        # A timeout of the request, likewise.
        with self.assertRaises(LimitError) as cm:
            sb.commands.run("sleep 20", timeout=0.3)
        self.assertEqual((cm.exception.status, cm.exception.exit_code), ("timeout", 124))
        self.assertEqual(cm.exception.limit, {"name": "timeout", "value": "300ms"})
        # A command that fails on its own is a CommandExitError, not a limit.
        with self.assertRaises(CommandExitError) as cm:
            sb.commands.run("echo failing; exit 3")
        self.assertNotIsInstance(cm.exception, LimitError)
        self.assertEqual((cm.exception.exit_code, cm.exception.stdout), (3, "failing\n"))
        self.assertEqual(cm.exception.outcome["status"], "exit_nonzero")
        # Killed by a signal: 128+N, as a shell says.
        with self.assertRaises(CommandExitError) as cm:
            sb.commands.run("kill -9 $$")
        self.assertEqual((cm.exception.status, cm.exception.exit_code), ("signaled", 137))
        # A stdin over the server's bound is refused as that, whole.
        with self.assertRaises(TooLargeError) as cm:
            sb.commands.run("cat >/dev/null", stdin=b"x" * (9 << 20))
        self.assertEqual(cm.exception.http_status, 413)
        # throw_on_error=False: the result, whatever its status.
        res = sb.commands.run("exit 5", throw_on_error=False)
        self.assertEqual((res.status, res.exit_code), ("exit_nonzero", 5))
        self.assertEqual(sb.commands.run("echo still here").stdout, "still here\n")

    def test_background_commands(self) -> None:
        sb = self.sandbox()
        quick = sb.commands.run("echo started; sleep 0.2; echo done; exit 3", background=True)
        slow = sb.commands.run(["sleep", "30"], background=True)
        self.assertTrue(quick.id.startswith("cmd-"))
        self.assertEqual(sorted(c["id"] for c in sb.commands.list()), sorted([quick.id, slow.id]))
        with self.assertRaises(CommandExitError) as cm:
            quick.wait()
        self.assertEqual((cm.exception.stdout, cm.exception.exit_code), ("started\ndone\n", 3))
        # Killed: its outcome says so; the sandbox goes on.
        self.assertIn(slow.kill()["state"], ("running", "ended"))
        self.assertEqual(slow.wait(throw_on_error=False).status, "signaled")
        self.assertEqual(sb.commands.connect(quick.id).wait(throw_on_error=False).exit_code, 3)
        self.assertEqual(sb.commands.run("echo still here").stdout, "still here\n")

    def test_terminal(self) -> None:
        sb = self.sandbox()
        term = sb.terminal(rows=30, cols=100)
        term.write("stty size; tty; printf 'typed %s\\n' word; exit 7\n")
        out = bytearray()
        outcome = term.wait(on_data=out.extend)
        text = out.decode("utf-8", "replace")
        self.assertIn("30 100", text)
        self.assertIn("/dev/pts/", text)
        self.assertIn("typed word", text)
        self.assertEqual((outcome["status"], outcome["exit_code"]), ("exit_nonzero", 7))
        # Resized and signalled while it runs.
        term = sb.terminal(["sh"])
        term.resize(40, 120)
        # A resize takes effect as the terminal gets it, not in order with
        # the input: the shell waits until it has.
        term.write('while [ "$(stty size)" != "40 120" ]; do sleep 0.05; done; stty size; exit\n')
        out = bytearray()
        term.wait(on_data=out.extend)
        # The answer ends its line; the echoed command line does not.
        self.assertRegex(out.decode("utf-8", "replace"), r"(?m)40 120\r?$")
        # Signalled once it runs (a signal sent before would find no
        # process group yet): the first output says so.
        term = sb.terminal("echo ready; exec sleep 30")
        seen = bytearray()

        def on_data(b: bytes) -> None:
            seen.extend(b)
            if b"ready" in seen and not getattr(on_data, "sent", False):
                on_data.sent = True  # type: ignore[attr-defined]
                term.signal("SIGINT")

        self.assertEqual(term.wait(on_data=on_data)["status"], "signaled")
        # A sandbox that is not there: the server's refusal, typed.
        with self.assertRaises(NotFoundError):
            Sandbox({"id": "sb-0000000000000000"}, sb._conn).terminal()

    def test_port_url(self) -> None:
        sb = self.sandbox()
        sb.files.write("/workspace/index.html", "<p>served</p>")
        # A server in a session of its own outlives the command that
        # started it (Popen returns once it runs in that session).
        sb.commands.run([
            "python3", "-c",
            "import subprocess; subprocess.Popen(['python3', '-m', 'http.server', '8123', '--bind', '127.0.0.1'],"
            " cwd='/workspace', start_new_session=True, stdin=subprocess.DEVNULL,"
            " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)",
        ])
        url = sb.port_url(8123, expires_in=120)
        self.assertTrue(url.startswith(self.url + "/v1/p/"), url)
        # A browser's request: no token.
        body, deadline = None, time.monotonic() + 60
        while body is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + "index.html", timeout=10) as r:
                    body = r.read().decode()
                    self.assertEqual(r.headers.get("Referrer-Policy"), "no-referrer")
            except urllib.error.HTTPError as e:
                if e.code != 502:  # the server is not listening yet
                    raise
                time.sleep(0.2)
        self.assertEqual(body, "<p>served</p>")
        # Altered, it opens nothing.
        with self.assertRaises(urllib.error.HTTPError) as cm:
            urllib.request.urlopen(url[:-3] + "xx/index.html", timeout=10)
        self.assertEqual(cm.exception.code, 401)

    def test_env_and_timeout_at_create(self) -> None:
        sb = Sandbox.create(url=self.url, token=self.token, envs={"X": "sandbox", "Y": "y"}, timeout=2)
        self.addCleanup(lambda: sb.kill() if sb.is_running() else None)
        self.assertEqual(sb.commands.run('echo "$X $Y"').stdout, "sandbox y\n")
        self.assertEqual(sb.commands.run('echo "$X $Y"', envs={"X": "command"}).stdout, "command y\n")
        # The timeout ends it, whatever is done with it meanwhile.
        sb.keep_alive()
        deadline = time.monotonic() + 60
        while sb.is_running() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(sb.get_info()["ended"], "timeout")

    def test_keepalive_kill_and_errors(self) -> None:
        sb = self.sandbox()
        before = sb.info["idle_expires"]
        info = sb.keep_alive()
        self.assertEqual(info["id"], sb.sandbox_id)
        self.assertGreaterEqual(info["idle_expires"], before)
        again = Sandbox.connect(sb.sandbox_id, url=self.url, token=self.token)
        self.assertEqual(again.info["state"], "running")
        sb.kill()
        self.assertEqual((sb.info["state"], sb.info.get("ended")), ("ended", "killed"))
        self.assertIn(sb.sandbox_id, [i["id"] for i in Sandbox.list(url=self.url, token=self.token)])
        with self.assertRaises(SandboxEndedError) as cm:
            again.commands.run("true")
        self.assertEqual(cm.exception.http_status, 410)
        self.assertFalse(again.is_running())
        with self.assertRaises(NotFoundError):
            Sandbox.connect("sb-0000000000000000", url=self.url, token=self.token)
        with self.assertRaises(AuthError) as cm:
            Sandbox.create(url=self.url, token="not-a-token")
        self.assertEqual(cm.exception.http_status, 401)
        with self.assertRaises(ForbiddenError):
            Sandbox.create(agent="other", url=self.url, token=self.token)


class AsyncTest(ServeTest):
    def test_async_client(self) -> None:
        async def scenario() -> None:
            async with await AsyncSandbox.create(url=self.url, token=self.token, envs={"X": "async"}) as sb:
                seen = []
                res = await sb.commands.run('echo "one $X"; echo two', on_stdout=seen.append)
                self.assertEqual(("".join(seen), res.stdout, res.exit_code), ("one async\ntwo\n", "one async\ntwo\n", 0))
                await sb.files.write("/workspace/a.txt", "caf\u00e9")
                self.assertEqual(await sb.files.read("/workspace/a.txt"), "caf\u00e9")
                self.assertTrue(await sb.files.exists("/workspace/a.txt"))
                watch = await sb.files.watch_dir("/workspace")
                await sb.commands.run("touch /workspace/b.txt")
                async for event in watch:
                    if (event.type, event.name) == ("create", "b.txt"):
                        break
                await watch.stop()
                with self.assertRaises(CommandExitError):
                    await sb.commands.run("exit 4")
                self.assertTrue(await sb.is_running())
            self.assertEqual(sb.info["state"], "ended")

        asyncio.run(scenario())


class AsyncParityTest(unittest.TestCase):
    """The asynchronous client has every public method of the
    synchronous one, as a coroutine."""

    def test_parity(self) -> None:
        for sync, aio in ((Sandbox, AsyncSandbox), (Commands, AsyncCommands), (Files, AsyncFiles)):
            for name, member in vars(sync).items():
                if name.startswith("_") or not callable(getattr(sync, name)) or isinstance(member, property):
                    continue
                self.assertTrue(hasattr(aio, name), "%s has no %s" % (aio.__name__, name))
                self.assertTrue(inspect.iscoroutinefunction(getattr(aio, name)), "%s.%s is no coroutine" % (aio.__name__, name))


if __name__ == "__main__":
    unittest.main()
