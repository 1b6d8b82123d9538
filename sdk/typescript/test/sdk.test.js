// SPDX-License-Identifier: Apache-2.0
//
// The SDK against a real cordon serve (started here), and its decoding of
// streamed output against answers made up by a fake fetch.
//
//   node --test test/sdk.test.js      (CORDON_BIN=/path/to/cordon to skip the build)

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { AuthError, CommandExitError, CordonError, DEFAULT_URL, ForbiddenError, LimitError, NotFoundError, Sandbox, SandboxEndedError } from "../index.js";
import { startServe } from "./serve.js";

describe("against cordon serve", () => {
  let serve;
  let skip;
  before(async () => {
    serve = await startServe();
    skip = serve.skip;
  });
  after(async () => {
    if (serve && !serve.skip) {
      const end = await serve.stop();
      assert.equal(end.code, 0, `cordon serve stopped with ${JSON.stringify(end)}:\n${serve.log()}`);
    }
  });

  test("a command's output streams as it comes", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token, agent: "sdk" });
    assert.match(sandbox.sandboxId, /\S/);
    assert.equal(sandbox.info.state, "running");
    // The command waits for a file that the test writes only once it has
    // seen the first line: the line came before the command ended.
    const pieces = [];
    let released = null;
    const result = await sandbox.commands.run(
      'echo first; i=0; while [ ! -e /workspace/go ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done; printf "héllo wörld\\n"; echo to-stderr >&2',
      {
        onStdout: (s) => {
          pieces.push(s);
          if (released === null && pieces.join("").includes("first\n")) released = sandbox.files.write("/workspace/go", "");
        },
        onStderr: (s) => pieces.push(`[err]${s}`),
      },
    );
    assert.notEqual(released, null, "the first line was not given to onStdout before the command ended");
    await released;
    assert.equal(result.exitCode, 0);
    assert.equal(result.status, "ok");
    assert.equal(result.stdout, "first\nhéllo wörld\n");
    assert.equal(result.stderr, "to-stderr\n");
    assert.equal(pieces.filter((p) => !p.startsWith("[err]")).join(""), result.stdout);
    assert.equal(result.outcome.status, "ok");
    await sandbox.kill();
  });

  test("files are written, read and listed inside the sandbox", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token });
    const text = "first line\nsecond, with \"quotes\" and ünïcode\n";
    await sandbox.commands.run(["mkdir", "/workspace/notes"]);
    const info = await sandbox.files.write("/workspace/notes/a.md", text);
    assert.equal(info.path, "/workspace/notes/a.md");
    assert.equal(await sandbox.files.read("/workspace/notes/a.md"), text);
    const bytes = await sandbox.files.read("/workspace/notes/a.md", { format: "bytes" });
    assert.deepEqual(Buffer.from(bytes), Buffer.from(text, "utf8"));
    // A command sees what was written.
    const cat = await sandbox.commands.run(["cat", "/workspace/notes/a.md"]);
    assert.equal(cat.stdout, text);
    await sandbox.files.write("/workspace/notes/run.sh", "#!/bin/sh\necho ran\n", { mode: 0o755 });
    const entries = await sandbox.files.list("/workspace/notes");
    assert.deepEqual(
      entries.map((e) => [e.name, e.type, e.path]),
      [
        ["a.md", "file", "/workspace/notes/a.md"],
        ["run.sh", "file", "/workspace/notes/run.sh"],
      ],
    );
    assert.equal(entries[0].size, Buffer.byteLength(text));
    assert.equal(entries[1].mode & 0o777, 0o755);
    assert.ok(entries[0].modifiedTime instanceof Date && !Number.isNaN(entries[0].modifiedTime.getTime()));
    assert.equal((await sandbox.commands.run("/workspace/notes/run.sh")).stdout, "ran\n");
    await assert.rejects(sandbox.files.read("/workspace/none.md"), (err) => err instanceof NotFoundError && err.httpStatus === 404);

    // Names: made, described, renamed, removed, as a command then sees them.
    assert.equal(await sandbox.files.makeDir("/workspace/out/deep"), true);
    assert.equal(await sandbox.files.makeDir("/workspace/out/deep"), false);
    assert.equal(await sandbox.files.exists("/workspace/out/deep"), true);
    assert.equal(await sandbox.files.exists("/workspace/out/none"), false);
    await sandbox.files.rename("/workspace/notes/a.md", "/workspace/out/deep/b.md");
    const moved = await sandbox.files.getInfo("/workspace/out/deep/b.md");
    assert.deepEqual([moved.name, moved.path, moved.type, moved.size], ["b.md", "/workspace/out/deep/b.md", "file", Buffer.byteLength(text)]);
    await assert.rejects(sandbox.files.getInfo("/workspace/notes/a.md"), (err) => err instanceof NotFoundError);
    // A directory out as a tar archive, and into another.
    const tar = await sandbox.files.readTar("/workspace/out");
    await sandbox.files.makeDir("/workspace/copy");
    const put = await sandbox.files.writeTar("/workspace/copy", tar);
    assert.ok(put.entries >= 2, JSON.stringify(put));
    assert.equal(await sandbox.files.read("/workspace/copy/deep/b.md"), text);
    await sandbox.files.remove("/workspace/copy");
    await sandbox.files.remove("/workspace/out");
    assert.equal((await sandbox.commands.run("ls /workspace")).stdout, "notes\n");
    // A path the sandbox may not write is refused as it would refuse a command.
    await assert.rejects(sandbox.files.makeDir("/usr/cordon-test"), (err) => err instanceof ForbiddenError && err.httpStatus === 403);
    await sandbox.kill();
  });

  test("a watch: in place when it answers, changes as they come, its end and why", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token, agent: "sdk" });
    await sandbox.files.makeDir("/workspace/w");
    const seen = [];
    let exited;
    let want = [];
    let wanted;
    const handle = await sandbox.files.watchDir("/workspace/w", (e) => {
      seen.push(`${e.type} ${e.name}${e.isDir ? "/" : ""}`);
      if (want.every((w) => seen.includes(w))) wanted?.();
    }, { recursive: true, onExit: (reason) => { exited = reason; } });
    // In place when it answers: what a command does next is seen; a new
    // directory is watched once its event came.
    for (const [cmd, w] of [
      ["mkdir /workspace/w/x", ["create x/"]],
      ["echo hi > /workspace/w/x/f && mv /workspace/w/x/f /workspace/w/g", ["create x/f", "rename x/f", "create g"]],
    ]) {
      const all = new Promise((resolve) => { wanted = resolve; });
      want = w;
      await sandbox.commands.run(cmd);
      if (want.every((x) => seen.includes(x))) wanted();
      await all;
    }
    const order = ["create x/", "create x/f", "rename x/f", "create g"].map((w) => seen.indexOf(w));
    assert.ok(order.every((i, k) => i >= 0 && (k === 0 || i > order[k - 1])), seen.join(", "));
    // Removing the directory ends the watch, with the reason.
    await sandbox.files.remove("/workspace/w");
    assert.equal(await handle.wait(), "/workspace/w was removed or moved");
    assert.equal(exited, "/workspace/w was removed or moved");
    assert.ok(seen.includes("remove /"), seen.join(", "));
    // Stopped here: no reason.
    await sandbox.files.makeDir("/workspace/w2");
    const stopped = await sandbox.files.watchDir("/workspace/w2", () => {});
    await stopped.stop();
    assert.equal(stopped.endReason, undefined);
    await assert.rejects(sandbox.files.watchDir("/workspace/none", () => {}), (err) => err instanceof NotFoundError);
    await sandbox.kill();
  });

  test("a limit of the profile is a LimitError carrying the outcome", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token });
    let streamed = "";
    const err = await sandbox.commands.run("head -c 100000 /dev/zero | tr '\\0' x", { onStdout: (s) => (streamed += s) }).then(
      () => assert.fail("the output limit did not end the command"),
      (e) => e,
    );
    assert.ok(err instanceof LimitError, `want a LimitError, got ${err}`);
    assert.ok(err instanceof CordonError);
    assert.equal(err.status, "output_limit");
    assert.equal(err.outcome.status, "output_limit");
    assert.equal(err.limit.name, "output");
    assert.equal(err.limit.value, "4KiB");
    assert.ok(err.stdout.length > 0 && err.stdout.length <= 4096 + 256, `stdout of ${err.stdout.length} bytes`);
    assert.equal(streamed, err.stdout);
    // The sandbox goes on: the output limit holds for each command.
    assert.equal((await sandbox.commands.run("echo still here")).stdout, "still here\n");

    // A command's own timeout is a limit too.
    const slow = await sandbox.commands.run("sleep 30", { timeoutMs: 200 }).catch((e) => e);
    assert.ok(slow instanceof LimitError, `want a LimitError, got ${slow}`);
    assert.equal(slow.status, "timeout");
    assert.equal(slow.exitCode, 124);
    assert.ok(slow instanceof CommandExitError);
    assert.deepEqual(slow.limit && [slow.limit.name, slow.limit.value], ["timeout", "200ms"]);

    // Without throwOnError, the result whatever the status.
    const r = await sandbox.commands.run("head -c 100000 /dev/zero", { throwOnError: false });
    assert.equal(r.status, "output_limit");
    await sandbox.kill();
  });

  test("a command that fails is a CommandExitError", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token });
    const err = await sandbox.commands.run("echo out; echo err >&2; exit 3").catch((e) => e);
    assert.ok(err instanceof CommandExitError, `want a CommandExitError, got ${err}`);
    assert.equal(err.exitCode, 3);
    assert.equal(err.status, "exit_nonzero");
    assert.equal(err.stdout, "out\n");
    assert.equal(err.stderr, "err\n");
    // Killed by a signal: 128+N, as a shell says.
    const killed = await sandbox.commands.run("kill -9 $$").catch((e) => e);
    assert.ok(killed instanceof CommandExitError && !(killed instanceof LimitError), `want a CommandExitError, got ${killed}`);
    assert.deepEqual([killed.status, killed.exitCode], ["signaled", 137]);
    await sandbox.kill();
  });

  test("keepalive, kill and the sandbox's state", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token });
    const info = await sandbox.keepAlive();
    assert.equal(info.id, sandbox.sandboxId);
    assert.equal(info.state, "running");
    assert.equal(await sandbox.isRunning(), true);
    const again = await Sandbox.connect(sandbox.sandboxId, { url: serve.url, token: serve.token });
    assert.equal((await again.commands.run(["echo", "connected"])).stdout, "connected\n");
    assert.ok((await Sandbox.list({ url: serve.url, token: serve.token })).some((s) => s.id === sandbox.sandboxId));
    const ended = await sandbox.kill();
    assert.equal(ended.state, "ended");
    assert.equal(ended.ended, "killed");
    assert.equal(await sandbox.isRunning(), false);
    await assert.rejects(sandbox.commands.run("true"), (err) => err instanceof SandboxEndedError && err.httpStatus === 410);
  });

  test("background commands: started, listed, waited for, killed", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token });
    const quick = await sandbox.commands.run("echo started; sleep 0.2; echo done; exit 3", { background: true });
    const slow = await sandbox.commands.run(["sleep", "30"], { background: true });
    assert.ok(quick.id.startsWith("cmd-"));
    assert.deepEqual((await sandbox.commands.list()).map((c) => c.id).sort(), [quick.id, slow.id].sort());
    const err = await quick.wait().catch((e) => e);
    assert.ok(err instanceof CommandExitError, `want a CommandExitError, got ${err}`);
    assert.deepEqual([err.stdout, err.exitCode], ["started\ndone\n", 3]);
    await slow.kill();
    assert.equal((await slow.wait({ throwOnError: false })).status, "signaled");
    assert.equal((await sandbox.commands.connect(quick.id).wait({ throwOnError: false })).exitCode, 3);
    assert.equal((await sandbox.commands.run("echo still here")).stdout, "still here\n");
    await sandbox.kill();
  });

  test("a terminal: its size, input, output, resize, signal and outcome", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token });
    let term = await sandbox.terminal(undefined, { rows: 30, cols: 100 });
    term.write("stty size; tty; printf 'typed %s\\n' word; exit 7\n");
    let out = "";
    let outcome = await term.wait({ onData: (b) => (out += Buffer.from(b).toString("utf8")) });
    assert.match(out, /30 100/);
    assert.match(out, /\/dev\/pts\//);
    assert.match(out, /typed word/);
    assert.deepEqual([outcome.status, outcome.exit_code], ["exit_nonzero", 7]);
    term = await sandbox.terminal(["sh"]);
    term.resize(40, 120);
    // A resize takes effect as the terminal gets it, not in order with the
    // input: the shell waits until it has.
    term.write('while [ "$(stty size)" != "40 120" ]; do sleep 0.05; done; stty size; exit\n');
    out = "";
    await term.wait({ onData: (b) => (out += Buffer.from(b).toString("utf8")) });
    assert.match(out, /40 120\r?$/m); // the answer ends its line; the echoed command line does not
    // Signalled once it runs (a signal sent before would find no process
    // group yet): the first output says so.
    term = await sandbox.terminal("echo ready; exec sleep 30");
    let sent = false;
    let seen = "";
    outcome = await term.wait({
      onData: (b) => {
        seen += Buffer.from(b).toString("utf8");
        if (!sent && seen.includes("ready")) {
          sent = true;
          term.signal("SIGINT");
        }
      },
    });
    assert.equal(outcome.status, "signaled");
    // Output that came before wait(), with the handshake's answer or
    // after it, is given to onData all the same.
    term = await sandbox.terminal("echo early");
    await new Promise((resolve) => setTimeout(resolve, 500));
    out = "";
    outcome = await term.wait({ onData: (b) => (out += Buffer.from(b).toString("utf8")) });
    assert.equal(outcome.status, "ok");
    assert.match(out, /early/);
    const gone = await Sandbox.connect(sandbox.sandboxId, { url: serve.url, token: serve.token });
    gone.sandboxId = "sb-0000000000000000";
    await assert.rejects(gone.terminal(), (err) => err instanceof NotFoundError && err.httpStatus === 404);
    await sandbox.kill();
  });

  test("a port URL opens a port to a request without a token", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token });
    await sandbox.files.write("/workspace/index.html", "<p>served</p>");
    // A server in a session of its own outlives the command that started it.
    await sandbox.commands.run([
      "python3",
      "-c",
      "import subprocess; subprocess.Popen(['python3', '-m', 'http.server', '8124', '--bind', '127.0.0.1'], cwd='/workspace', start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)",
    ]);
    const url = await sandbox.portUrl(8124, { expiresInMs: 120000 });
    assert.ok(url.startsWith(`${serve.url}/v1/p/`), url);
    let res;
    const deadline = Date.now() + 60000;
    for (;;) {
      res = await fetch(`${url}index.html`);
      if (res.status !== 502 || Date.now() > deadline) break;
      await res.arrayBuffer();
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "<p>served</p>");
    assert.equal(res.headers.get("referrer-policy"), "no-referrer");
    const altered = await fetch(`${url.slice(0, -3)}xx/index.html`);
    assert.equal(altered.status, 401);
    await altered.arrayBuffer();
    await sandbox.kill();
  });

  test("envs and a timeout at create", async (t) => {
    if (skip) return t.skip(skip);
    const sandbox = await Sandbox.create({ url: serve.url, token: serve.token, envs: { X: "sandbox", Y: "y" }, timeoutMs: 2000 });
    assert.equal((await sandbox.commands.run('echo "$X $Y"')).stdout, "sandbox y\n");
    assert.equal((await sandbox.commands.run('echo "$X $Y"', { envs: { X: "command" } })).stdout, "command y\n");
    // The timeout ends it, whatever is done with it meanwhile.
    await sandbox.keepAlive();
    const deadline = Date.now() + 60000;
    while ((await sandbox.isRunning()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    assert.equal((await sandbox.getInfo()).ended, "timeout");
  });

  test("a wrong token is an AuthError, another agent's a ForbiddenError, an unknown sandbox a NotFoundError", async (t) => {
    if (skip) return t.skip(skip);
    await assert.rejects(Sandbox.create({ url: serve.url, token: "not-a-token" }), (err) => err instanceof AuthError && err.httpStatus === 401);
    await assert.rejects(Sandbox.create({ url: serve.url, token: serve.token, agent: "someone-else" }), (err) => err instanceof ForbiddenError && err.httpStatus === 403);
    await assert.rejects(Sandbox.connect("sb-does-not-exist", { url: serve.url, token: serve.token }), (err) => err instanceof NotFoundError && err.httpStatus === 404);
  });
});

/** A fetch that answers every request with these JSON lines (an exec's stream). */
function fakeFetch(lines) {
  return async (url, init) => {
    const path = new URL(url).pathname;
    if (init.method === "POST" && path === "/v1/sandboxes") {
      return new Response(JSON.stringify({ id: "sb-1", state: "running" }), { status: 201 });
    }
    const body = new ReadableStream({
      start(c) {
        for (const l of lines) c.enqueue(new TextEncoder().encode(l));
        c.close();
      },
    });
    return new Response(body, { status: 200 });
  };
}

describe("streamed output", () => {
  const b64 = (bytes) => Buffer.from(bytes).toString("base64");
  const ok = JSON.stringify({ outcome: { status: "ok", exit_code: 0, command_exit_code: 0, message: "" } }) + "\n";

  test("text fields are used when present; base64 otherwise, a character split between lines kept whole", async () => {
    const e = Buffer.from("é", "utf8"); // two bytes
    const lines = [
      JSON.stringify({ stdout: b64("plain "), stdout_text: "plain " }) + "\n",
      // Base64 only: the first byte of é here, the second in the next line.
      JSON.stringify({ stdout: b64([0x61, e[0]]) }) + "\n",
      JSON.stringify({ stdout: b64([e[1], 0x62]) }) + "\n",
      // Not UTF-8: base64 alone, decoded with U+FFFD.
      JSON.stringify({ stderr: b64([0xff, 0x0a]) }) + "\n",
      // A JSON line cut across two chunks of the body.
      JSON.stringify({ stdout: b64("end"), stdout_text: "end" }).slice(0, 9),
      JSON.stringify({ stdout: b64("end"), stdout_text: "end" }).slice(9) + "\n",
      ok,
    ];
    const sandbox = await Sandbox.create({ url: "http://127.0.0.1:1", token: "t", fetch: fakeFetch(lines) });
    const seen = [];
    const r = await sandbox.commands.run("x", { onStdout: (s) => seen.push(s) });
    assert.equal(r.stdout, "plain aébend");
    assert.equal(seen.join(""), r.stdout);
    assert.deepEqual(seen, ["plain ", "a", "éb", "end"]);
    assert.equal(r.stderr, "\ufffd\n");
  });

  test("a stream without an outcome, and an error line, are errors", async () => {
    const cut = await Sandbox.create({ url: "http://127.0.0.1:1", fetch: fakeFetch([JSON.stringify({ stdout: b64("x") }) + "\n"]) });
    await assert.rejects(cut.commands.run("x"), /without the command's outcome/);
    const failed = await Sandbox.create({ url: "http://127.0.0.1:1", fetch: fakeFetch([JSON.stringify({ error: "the sandbox ended" }) + "\n"]) });
    await assert.rejects(failed.commands.run("x"), (err) => err instanceof CordonError && /the sandbox ended/.test(err.message));
    // With the status the same request without stream would have had, the error of that status.
    const gone = await Sandbox.create({ url: "http://127.0.0.1:1", fetch: fakeFetch([JSON.stringify({ error: "sandbox sb-1 has ended (memory)", http_status: 410 }) + "\n"]) });
    await assert.rejects(gone.commands.run("x"), (err) => err instanceof SandboxEndedError && err.httpStatus === 410 && err.sandboxId === "sb-1");
  });

  test("bad arguments are refused before anything is sent", async () => {
    const sandbox = await Sandbox.create({ url: "http://127.0.0.1:1", fetch: fakeFetch([ok]) });
    await assert.rejects(sandbox.commands.run([]), /non-empty array/);
    await assert.rejects(sandbox.commands.run("x", { timeoutMs: 1.5 }), /timeoutMs/);
    // No url and no $CORDON_URL: cordon serve's default address.
    const asked = [];
    const saved = process.env.CORDON_URL;
    delete process.env.CORDON_URL;
    try {
      await Sandbox.create({ url: "", fetch: async (url) => (asked.push(url), new Response('{"id":"sb-1"}', { status: 201 })) });
    } finally {
      if (saved !== undefined) process.env.CORDON_URL = saved;
    }
    assert.deepEqual(asked, [`${DEFAULT_URL}/v1/sandboxes`]);
    assert.equal(DEFAULT_URL, "http://127.0.0.1:8700");
  });
});
