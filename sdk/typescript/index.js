// SPDX-License-Identifier: Apache-2.0
//
// @cordon-sandbox/sdk: the client of cordon serve's HTTP API
// (internal/server/openapi.yaml in the cordon repository), shaped like
// the SDKs of hosted sandboxes:
//
//   const sandbox = await Sandbox.create({ url, token });
//   const r = await sandbox.commands.run("make test", { onStdout: (s) => process.stdout.write(s) });
//   await sandbox.files.write("/workspace/notes.md", "hello");
//   await sandbox.kill();
//
// No dependencies: Node 18's fetch, TextDecoder and Buffer. The types are
// in index.d.ts.

import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import https from "node:https";

/** The API's path prefix. */
const API = "/v1";

/** The server when neither url nor $CORDON_URL names one: cordon serve's default address. */
export const DEFAULT_URL = "http://127.0.0.1:8700";

/**
 * What is done with a request refused with 429 (a rate, a cap on commands
 * at once: nothing was done): sent again at most maxRetries times, each
 * after the wait Retry-After asks for (1 s when it says none, at most
 * 10 s), as long as the waits add up to at most maxWaitMs; onRetry(attempt,
 * waitMs, error) is called before each wait. Then RateLimitError.
 */
export const DEFAULT_RETRY_POLICY = Object.freeze({ maxRetries: 3, maxWaitMs: 30000 });

/** The longest one wait for a retry. */
const LONGEST_WAIT_MS = 10000;

/** Outcome statuses that mean a limit ended the command (docs/OUTCOME.md). */
export const LIMIT_STATUSES = Object.freeze(new Set([
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
]));

/**
 * Every error of the SDK (the SDKs' one vocabulary, docs/SDK.md).
 * httpStatus is the server's answer, when there was one; sandboxId the
 * sandbox the error names.
 */
export class CordonError extends Error {
  constructor(message, { httpStatus, sandboxId } = {}) {
    super(message);
    this.name = "CordonError";
    this.httpStatus = httpStatus;
    this.sandboxId = sandboxId;
  }
}

/** 401: no valid token. */
export class AuthError extends CordonError {
  constructor(message, opts) {
    super(message, opts);
    this.name = "AuthError";
  }
}

/** 403: not this token's to do, or a path the sandbox may not write. */
export class ForbiddenError extends CordonError {
  constructor(message, opts) {
    super(message, opts);
    this.name = "ForbiddenError";
  }
}

/** 404: no such sandbox (or not the token's), no such file. */
export class NotFoundError extends CordonError {
  constructor(message, opts) {
    super(message, opts);
    this.name = "NotFoundError";
  }
}

/** 409: refused in the sandbox's state, or by its policy. */
export class ConflictError extends CordonError {
  constructor(message, opts) {
    super(message, opts);
    this.name = "ConflictError";
  }
}

/** 410: the sandbox has ended. */
export class SandboxEndedError extends CordonError {
  constructor(message, opts) {
    super(message, opts);
    this.name = "SandboxEndedError";
  }
}

/** 413: a request over the server's bounds (a command's stdin, an upload). */
export class TooLargeError extends CordonError {
  constructor(message, opts) {
    super(message, opts);
    this.name = "TooLargeError";
  }
}

/** 423: held for a person; send the very same request again once approvalId is approved. */
export class ApprovalRequiredError extends CordonError {
  constructor(message, opts = {}) {
    super(message, opts);
    this.name = "ApprovalRequiredError";
    this.approvalId = opts.approvalId;
  }
}

/** 429, still, after the retry policy's tries: retryAfterMs is the wait the server asked for last. */
export class RateLimitError extends CordonError {
  constructor(message, opts = {}) {
    super(message, opts);
    this.name = "RateLimitError";
    this.retryAfterMs = opts.retryAfterMs;
  }
}

/**
 * The command ran and did not end with status ok: status is the outcome's
 * (exit_nonzero, signaled, a limit's), exitCode the status cordon run
 * would exit with (the command's own, 128+N for signal N, 124 for a
 * timeout), stdout and stderr its output, outcome the whole outcome.
 */
export class CommandExitError extends CordonError {
  constructor(result, sandboxId) {
    super(`cordon: command ended with ${result.status}: ${result.outcome.message ?? ""}`, { sandboxId });
    this.name = "CommandExitError";
    this.status = result.status;
    this.exitCode = result.exitCode;
    this.stdout = result.stdout;
    this.stderr = result.stderr;
    this.outcome = result.outcome;
  }
}

/** A limit ended the command: limit is the outcome's {name, value}, undefined when it names none. */
export class LimitError extends CommandExitError {
  constructor(result, sandboxId) {
    super(result, sandboxId);
    this.name = "LimitError";
    this.limit = result.outcome.limit;
  }
}

const BY_STATUS = {
  401: AuthError,
  403: ForbiddenError,
  404: NotFoundError,
  409: ConflictError,
  410: SandboxEndedError,
  413: TooLargeError,
  423: ApprovalRequiredError,
  429: RateLimitError,
};

/** The error for an answer that is not a success. */
function answerError(httpStatus, message, opts = {}) {
  const Type = BY_STATUS[httpStatus] ?? CordonError;
  const text = httpStatus ? `cordon serve: ${httpStatus}: ${message}` : `cordon serve: ${message}`;
  return new Type(text, { httpStatus: httpStatus || undefined, ...opts });
}

/** The wait a Retry-After header asks for, in ms: 1s when it says nothing usable. */
function retryAfter(h) {
  const n = Number.parseInt(h ?? "", 10);
  if (!Number.isFinite(n) || n < 1) return 1000;
  return Math.min(n * 1000, LONGEST_WAIT_MS);
}

/** A stream's bytes made text as they come, a character split between chunks kept whole. */
class StreamText {
  constructor() {
    this.decoder = new TextDecoder("utf-8");
    this.text = "";
  }

  /** The text of one event: its UTF-8 text when the server sent it, else its base64 bytes decoded. */
  push(base64, text) {
    let s;
    if (typeof text === "string") {
      s = this.decoder.decode() + text;
    } else {
      s = this.decoder.decode(Buffer.from(base64, "base64"), { stream: true });
    }
    this.text += s;
    return s;
  }

  /** What is left at the end (a cut character, as U+FFFD). */
  end() {
    const s = this.decoder.decode();
    this.text += s;
    return s;
  }
}

/** The connection to one cordon serve: its URL, token, fetch and retry policy. */
class Connection {
  constructor(opts = {}) {
    const url = opts.url || process.env.CORDON_URL || DEFAULT_URL;
    const token = opts.token ?? process.env.CORDON_TOKEN;
    this.url = String(url).replace(/\/+$/, "");
    this.token = token;
    this.retry = { ...DEFAULT_RETRY_POLICY, ...(opts.retry ?? {}) };
    this.fetch = opts.fetch ?? globalThis.fetch;
    if (typeof this.fetch !== "function") throw new CordonError("no fetch: Node 18 or later is needed");
  }

  /** Sends a request; answers the response when it succeeded, throws the server's error otherwise. */
  async request(method, path, { body, contentType, signal } = {}) {
    const headers = {};
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (contentType) headers["Content-Type"] = contentType;
    let waited = 0;
    for (let attempt = 0; ; attempt++) {
      let res;
      try {
        res = await this.fetch(this.url + path, { method, headers, body, signal });
      } catch (err) {
        if (err?.name === "AbortError") throw err;
        throw new CordonError(`cordon serve at ${this.url}: ${err?.cause?.message ?? err?.message ?? err}`);
      }
      if (res.status < 300) return res;
      const text = await res.text().catch(() => "");
      let message = text.trim();
      let sandboxId;
      let approvalId;
      try {
        const e = JSON.parse(text);
        if (e && typeof e.error === "string") {
          message = e.error;
          sandboxId = typeof e.sandbox === "string" ? e.sandbox : undefined;
          approvalId = typeof e.approval === "string" ? e.approval : undefined;
        }
      } catch {
        // Not JSON: the text itself.
      }
      const wait = retryAfter(res.headers.get("retry-after"));
      const err = answerError(res.status, message || res.statusText, {
        sandboxId,
        approvalId,
        retryAfterMs: res.status === 429 ? wait : undefined,
      });
      const p = this.retry;
      if (res.status !== 429 || attempt >= p.maxRetries || waited + wait > p.maxWaitMs) {
        if (res.status === 429 && attempt > 0) err.message += ` (sent ${attempt + 1} times over ${waited / 1000} s)`;
        throw err;
      }
      // Refused before anything was done (a rate, a cap on commands at
      // once): sent again when the server says, as the policy allows.
      if (typeof p.onRetry === "function") p.onRetry(attempt + 1, wait, err);
      await new Promise((resolve) => setTimeout(resolve, wait));
      waited += wait;
    }
  }

  /** Sends in as JSON (when given) and answers the JSON of the answer. */
  async call(method, path, input, signal) {
    const res = await this.request(method, path, {
      body: input === undefined ? undefined : JSON.stringify(input),
      contentType: input === undefined ? undefined : "application/json",
      signal,
    });
    return res.json();
  }
}

function sandboxPath(id, rest = "") {
  return `${API}/sandboxes/${encodeURIComponent(id)}${rest}`;
}

/** A duration in ms as the API's ("1500ms"). */
function duration(ms) {
  if (!Number.isInteger(ms) || ms < 1) throw new CordonError(`timeoutMs: want a whole number of milliseconds, at least 1, found ${ms}`);
  return `${ms}ms`;
}

/** A command running in the background in a sandbox: wait() for its result, or kill() it. */
export class CommandHandle {
  constructor(sandbox, id, args = []) {
    this.sandbox = sandbox;
    this.id = id;
    this.args = args;
  }

  /** Waits for the command to end and answers its result, as run does (LimitError, CommandExitError unless throwOnError is false). */
  async wait(opts = {}) {
    const path = sandboxPath(this.sandbox.sandboxId, `/commands/${encodeURIComponent(this.id)}?wait=1`);
    let answer;
    do {
      answer = await this.sandbox.connection.call("GET", path, undefined, opts.signal);
    } while (answer.id !== undefined); // a wait given up before the end: again
    const text = (b64) => new TextDecoder("utf-8").decode(Buffer.from(b64 ?? "", "base64"));
    return commandResult(answer.outcome ?? {}, text(answer.stdout), text(answer.stderr), opts.throwOnError, this.sandbox.sandboxId);
  }

  /** Ends the command (its process group); answers how it is. */
  async kill(opts = {}) {
    return this.sandbox.connection.call("POST", sandboxPath(this.sandbox.sandboxId, `/commands/${encodeURIComponent(this.id)}/kill`), undefined, opts.signal);
  }
}

/** A command's result; thrown as LimitError or CommandExitError when its status is not ok, unless throwOnError is false. */
function commandResult(outcome, stdout, stderr, throwOnError, sandboxId) {
  const result = { exitCode: outcome.exit_code, stdout, stderr, status: outcome.status, outcome };
  if (outcome.status === "ok" || throwOnError === false) return result;
  if (outcome.limit || LIMIT_STATUSES.has(outcome.status)) throw new LimitError(result, sandboxId);
  throw new CommandExitError(result, sandboxId);
}

/** A command, run in a sandbox. */
export class Commands {
  constructor(sandbox) {
    this.sandbox = sandbox;
  }

  /** The sandbox's background commands ({id, args, state, outcome once ended}), oldest first. */
  async list(opts = {}) {
    return this.sandbox.connection.call("GET", sandboxPath(this.sandbox.sandboxId, "/commands"), undefined, opts.signal);
  }

  /** The background command id, started earlier. */
  connect(id) {
    return new CommandHandle(this.sandbox, id);
  }

  /**
   * Runs cmd (a string, run by sh -c; or an argv) and answers its result
   * once it ended, its output given to onStdout and onStderr as it comes.
   * A limit that ended it throws LimitError; another status than ok throws
   * CommandExitError, unless throwOnError is false.
   */
  async run(cmd, opts = {}) {
    const args = typeof cmd === "string" ? ["sh", "-c", cmd] : Array.from(cmd ?? []);
    if (args.length === 0 || args.some((a) => typeof a !== "string")) {
      throw new CordonError("commands.run: want a command line or a non-empty array of strings");
    }
    const req = { args, stream: true };
    if (opts.envs) req.env = opts.envs;
    if (opts.cwd) req.dir = opts.cwd;
    if (opts.timeoutMs !== undefined) req.timeout = duration(opts.timeoutMs);
    if (opts.stdin !== undefined) {
      req.stdin = Buffer.from(typeof opts.stdin === "string" ? Buffer.from(opts.stdin, "utf8") : opts.stdin).toString("base64");
    }
    const conn = this.sandbox.connection;
    if (opts.background) {
      delete req.stream;
      req.background = true;
      const started = await conn.call("POST", sandboxPath(this.sandbox.sandboxId, "/exec"), req, opts.signal);
      return new CommandHandle(this.sandbox, started.id, started.args);
    }
    const res = await conn.request("POST", sandboxPath(this.sandbox.sandboxId, "/exec"), {
      body: JSON.stringify(req),
      contentType: "application/json",
      signal: opts.signal,
    });
    const out = new StreamText();
    const errText = new StreamText();
    const emit = (fn, s) => {
      if (fn && s) fn(s);
    };
    let outcome;
    for await (const line of jsonLines(res.body)) {
      let ev;
      try {
        ev = JSON.parse(line);
      } catch (err) {
        throw new CordonError(`cordon serve: reading the output: ${err.message}`);
      }
      if (ev.outcome) {
        outcome = ev.outcome;
        break;
      }
      if (ev.error) {
        // The command could not be run after all: the error the same
        // request without stream would have had.
        throw answerError(ev.http_status, ev.error, { sandboxId: this.sandbox.sandboxId });
      }
      if (ev.stdout !== undefined || ev.stdout_text !== undefined) emit(opts.onStdout, out.push(ev.stdout ?? "", ev.stdout_text));
      if (ev.stderr !== undefined || ev.stderr_text !== undefined) emit(opts.onStderr, errText.push(ev.stderr ?? "", ev.stderr_text));
    }
    emit(opts.onStdout, out.end());
    emit(opts.onStderr, errText.end());
    if (!outcome) throw new CordonError("cordon serve: the output ended without the command's outcome");
    return commandResult(outcome, out.text, errText.text, opts.throwOnError, this.sandbox.sandboxId);
  }
}

/**
 * The lines of a response body, as text; a line longer than maxLine
 * characters throws.
 */
async function* jsonLines(body, maxLine = 256 << 20) {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const from = buf.length; // no newline before it: searched already
      buf += decoder.decode(value, { stream: true });
      let nl = buf.indexOf("\n", from);
      while (nl >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) yield line;
        nl = buf.indexOf("\n");
      }
      if (buf.length > maxLine) throw new CordonError(`cordon: the server sent a line of more than ${maxLine} characters`);
    }
    buf += decoder.decode();
    if (buf.trim()) yield buf.trim();
  } finally {
    reader.releaseLock();
    body.cancel().catch(() => {});
  }
}

/** The files of a sandbox, read and written inside it, as its commands would. */
export class Files {
  constructor(sandbox) {
    this.sandbox = sandbox;
  }

  path(path, rest = "", extra = {}) {
    const q = new URLSearchParams({ path, ...extra });
    return sandboxPath(this.sandbox.sandboxId, `${rest}?${q}`);
  }

  /** The content of the file at path (absolute): text (UTF-8) by default, or bytes with {format: "bytes"}. */
  async read(path, opts = {}) {
    const res = await this.sandbox.connection.request("GET", this.path(path, "/files"), { signal: opts.signal });
    const bytes = new Uint8Array(await res.arrayBuffer());
    return opts.format === "bytes" ? bytes : new TextDecoder("utf-8").decode(bytes);
  }

  /** Writes data (text as UTF-8, or bytes) to the file at path (absolute); mode as octal permission bits. */
  async write(path, data, opts = {}) {
    const extra = opts.mode === undefined ? {} : { mode: opts.mode.toString(8) };
    const body = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data instanceof ArrayBuffer ? new Uint8Array(data) : data);
    await this.sandbox.connection.request("PUT", this.path(path, "/files", extra), {
      body,
      contentType: "application/octet-stream",
      signal: opts.signal,
    });
    const name = path.slice(path.lastIndexOf("/") + 1);
    return { name, path, type: "file" };
  }

  /**
   * The directory at path as a tar archive (links as links, never
   * followed); an archive the server cut short (no end marker) throws.
   */
  async readTar(path, opts = {}) {
    const res = await this.sandbox.connection.request("GET", this.path(path, "/files/tar"), { signal: opts.signal });
    const data = new Uint8Array(await res.arrayBuffer());
    if (!tarComplete(data)) {
      throw new CordonError(`cordon serve: the archive of ${path} was cut short (${data.length} bytes, no end marker)`, { sandboxId: this.sandbox.sandboxId });
    }
    return data;
  }

  /** Extracts the tar archive data into the directory at path (which must exist); answers what was extracted. */
  async writeTar(path, data, opts = {}) {
    const res = await this.sandbox.connection.request("PUT", this.path(path, "/files/tar"), {
      body: Buffer.from(data instanceof ArrayBuffer ? new Uint8Array(data) : data),
      contentType: "application/x-tar",
      signal: opts.signal,
    });
    return res.json();
  }

  /** Removes the file, link or directory (with everything in it) at path. */
  async remove(path, opts = {}) {
    await this.sandbox.connection.call("DELETE", this.path(path, "/files", { recursive: "1" }), undefined, opts.signal);
  }

  /** Renames the entry at oldPath to newPath. */
  async rename(oldPath, newPath, opts = {}) {
    await this.sandbox.connection.call("POST", this.path(oldPath, "/files/rename", { to: newPath }), undefined, opts.signal);
  }

  /** Makes the directory at path, with its parents; false when it was there already. */
  async makeDir(path, opts = {}) {
    const a = await this.sandbox.connection.call("POST", this.path(path, "/files/mkdir"), undefined, opts.signal);
    return a.created === true;
  }

  /** Describes the entry at path (a link not followed); NotFoundError when there is none. */
  async getInfo(path, opts = {}) {
    const e = await this.sandbox.connection.call("GET", this.path(path, "/files/stat"), undefined, opts.signal);
    return entryInfo(e.path ?? path, e);
  }

  /** Whether there is an entry at path. */
  async exists(path, opts = {}) {
    try {
      await this.getInfo(path, opts);
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /**
   * Watches the directory at path (and its subdirectories, with
   * {recursive: true}; links are not followed) and answers once the
   * watch is in place: onEvent gets each change ({type, name, isDir}) as
   * it comes, onExit(reason) is called once it ended, with why the server
   * ended it (undefined when stopped here, or the connection was lost).
   */
  async watchDir(path, onEvent, opts = {}) {
    const controller = new AbortController();
    opts.signal?.addEventListener("abort", () => controller.abort(), { once: true });
    const extra = opts.recursive ? { recursive: "1" } : {};
    const res = await this.sandbox.connection.request("GET", this.path(path, "/files/watch", extra), { signal: controller.signal });
    return new WatchHandle(res.body, onEvent, opts.onExit, controller);
  }

  /** The entries of the directory at path (absolute), sorted by name. */
  async list(path, opts = {}) {
    const extra = opts.max === undefined ? {} : { max: String(opts.max) };
    const l = await this.sandbox.connection.call("GET", this.path(path, "/files/list", extra), undefined, opts.signal);
    const dir = l.path.endsWith("/") ? l.path : `${l.path}/`;
    return l.entries.map((e) => entryInfo(dir + e.name, e));
  }
}

/** The longest line of a watch taken (the server's are at most 64 KiB). */
const MAX_WATCH_LINE = 1 << 20;

/**
 * A watch of a directory of a sandbox (Files.watchDir): stop() ends it;
 * wait() answers, once it ended, why the server ended it (endReason;
 * undefined when it was stopped here). A change is {type, name, isDir}:
 * type "create", "write", "remove", "rename" (moved away, under its old
 * name), "chmod" or "overflow" (changes were lost: list the directory
 * again); name the entry's path relative to the directory ("" for the
 * directory itself).
 */
export class WatchHandle {
  constructor(body, onEvent, onExit, controller) {
    this.endReason = undefined;
    this.controller = controller;
    this.done = (async () => {
      try {
        for await (const line of jsonLines(body, MAX_WATCH_LINE)) {
          const e = JSON.parse(line);
          if (e.type === "end") {
            this.endReason = e.reason;
            break;
          }
          const name = e.name_base64 ? Buffer.from(e.name_base64, "base64").toString("utf8") : (e.name ?? "");
          if (typeof onEvent === "function") onEvent({ type: e.type, name, isDir: e.dir === true });
        }
      } catch (err) {
        // Stopped here, or the connection was lost: no reason; what this
        // client refused: why.
        if (err instanceof CordonError) this.endReason = `${err.message}; the watch was ended`;
      }
      if (typeof onExit === "function") onExit(this.endReason);
      return this.endReason;
    })();
  }

  /** Waits for the watch to end; answers why the server ended it. */
  wait() {
    return this.done;
  }

  /** Ends the watch, and waits until it has. */
  async stop() {
    this.controller.abort();
    await this.done;
  }
}

/**
 * Whether data is a whole tar archive: header by header, each member's
 * blocks, to the end marker (two zero blocks) where a header would be.
 */
function tarComplete(data) {
  const zero = (from) => from + 512 <= data.length && data.subarray(from, from + 512).every((b) => b === 0);
  let pos = 0;
  while (pos + 512 <= data.length) {
    if (zero(pos)) return zero(pos + 512);
    const field = data.subarray(pos + 124, pos + 136);
    let size = 0;
    if (field[0] & 0x80) {
      for (const b of field.subarray(1)) size = size * 256 + b;
    } else {
      const text = Buffer.from(field).toString("latin1").split("\0")[0].trim();
      if (text !== "" && !/^[0-7]+$/.test(text)) return false;
      size = text === "" ? 0 : Number.parseInt(text, 8);
    }
    pos += 512 + Math.ceil(size / 512) * 512;
  }
  return false;
}

/** An entry of the API (a listing's, or stat's) at path. */
function entryInfo(path, e) {
  return {
    name: e.name,
    path,
    type: e.type,
    size: e.size,
    mode: Number.parseInt(e.mode, 8),
    modifiedTime: new Date(e.modified),
    symlinkTarget: e.target,
  };
}

/** The most one terminal message may hold. */
const MAX_MESSAGE = 1 << 20;

/** The most output a terminal keeps before wait() is called. */
const MAX_EARLY = 1 << 20;

/**
 * A command on a pseudo-terminal in a sandbox, over the API's WebSocket
 * (spoken here with node:http: binary messages are the terminal's bytes
 * both ways, text messages JSON control messages).
 */
export class Terminal {
  constructor(socket, head, sandboxId) {
    this.socket = socket;
    this.sandboxId = sandboxId;
    this.buf = Buffer.from(head ?? []);
    this.fragments = null;
    this.waiters = [];
    this.done = null; // {outcome} or {error}, once the terminal ended
    this.onData = null;
    // Output that came before wait(), for its onData: at most
    // MAX_EARLY bytes, the rest dropped (as all output is once wait()
    // was called without onData).
    this.early = [];
    this.earlyBytes = 0;
    this.waited = false;
    socket.on("data", (chunk) => {
      this.buf = Buffer.concat([this.buf, chunk]);
      this.parse();
    });
    const ended = () => this.finish({ error: new CordonError("cordon serve: the terminal ended without an outcome", { sandboxId }) });
    socket.on("end", ended);
    socket.on("close", ended);
    socket.on("error", (err) => this.finish({ error: new CordonError(`cordon serve: the terminal: ${err.message}`, { sandboxId }) }));
    // What came with the handshake's answer: the command's first output.
    this.parse();
  }

  /** Starts a command on a terminal of the sandbox (see Sandbox.terminal). */
  static open(connection, sandboxId, query) {
    const u = new URL(`${connection.url}${sandboxPath(sandboxId, "/terminal")}?${query}`);
    const key = randomBytes(16).toString("base64");
    const headers = { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13" };
    if (connection.token) headers.Authorization = `Bearer ${connection.token}`;
    return new Promise((resolve, reject) => {
      const req = (u.protocol === "https:" ? https : http).request(u, { headers });
      req.on("upgrade", (res, socket, head) => {
        const want = createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
        if (res.statusCode !== 101 || res.headers["sec-websocket-accept"] !== want) {
          socket.destroy();
          reject(new CordonError("cordon serve: the terminal's WebSocket answer does not match its key", { sandboxId }));
          return;
        }
        resolve(new Terminal(socket, head, sandboxId));
      });
      req.on("response", (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let message = text.trim();
          let fields = {};
          try {
            fields = JSON.parse(text) ?? {};
            if (typeof fields.error === "string") message = fields.error;
          } catch {
            // Not JSON: the text itself.
          }
          reject(answerError(res.statusCode, message, { sandboxId: fields.sandbox, approvalId: fields.approval }));
        });
      });
      req.on("error", (err) => reject(new CordonError(`cordon serve at ${connection.url}: ${err.message}`)));
      req.end();
    });
  }

  /** Sends input (text as UTF-8, or bytes). */
  write(data) {
    this.send(0x2, typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data));
  }

  /** Changes the terminal's size. */
  resize(rows, cols) {
    this.send(0x1, Buffer.from(JSON.stringify({ type: "resize", rows, cols })));
  }

  /** Sends a signal ("SIGINT", "SIGTERM", ...) to the command's process group. */
  signal(name) {
    this.send(0x1, Buffer.from(JSON.stringify({ type: "signal", signal: name })));
  }

  /**
   * Reads the terminal until its command ends, giving each piece of output
   * to onData as it comes; answers the outcome (cordon run's).
   */
  wait({ onData } = {}) {
    this.onData = onData ?? null;
    const early = this.early;
    this.early = [];
    this.waited = true;
    if (this.onData) for (const b of early) this.onData(b);
    if (this.done) return this.done.error ? Promise.reject(this.done.error) : Promise.resolve(this.done.outcome);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Ends the terminal (and so its command). */
  close() {
    try {
      this.send(0x8, Buffer.from([0x03, 0xe8]));
    } catch {
      // Closed already.
    }
    this.socket.destroy();
  }

  send(opcode, payload) {
    const n = payload.length;
    let head;
    if (n < 126) head = Buffer.from([0x80 | opcode, 0x80 | n]);
    else if (n < 65536) {
      head = Buffer.alloc(4);
      head[0] = 0x80 | opcode;
      head[1] = 0x80 | 126;
      head.writeUInt16BE(n, 2);
    } else {
      head = Buffer.alloc(10);
      head[0] = 0x80 | opcode;
      head[1] = 0x80 | 127;
      head.writeBigUInt64BE(BigInt(n), 2);
    }
    const mask = randomBytes(4);
    const masked = Buffer.alloc(n);
    for (let i = 0; i < n; i++) masked[i] = payload[i] ^ mask[i % 4];
    this.socket.write(Buffer.concat([head, mask, masked]));
  }

  parse() {
    for (;;) {
      if (this.buf.length < 2) return;
      const b0 = this.buf[0];
      const b1 = this.buf[1];
      let n = b1 & 0x7f;
      let at = 2;
      if (b1 & 0x80) return this.finish({ error: new CordonError("cordon serve: the terminal's WebSocket sent a masked frame") });
      if (n === 126) {
        if (this.buf.length < 4) return;
        n = this.buf.readUInt16BE(2);
        at = 4;
      } else if (n === 127) {
        if (this.buf.length < 10) return;
        const big = this.buf.readBigUInt64BE(2);
        if (big > BigInt(MAX_MESSAGE)) return this.finish({ error: new CordonError(`cordon serve: a terminal message over ${MAX_MESSAGE} bytes`) });
        n = Number(big);
        at = 10;
      }
      if (n > MAX_MESSAGE) return this.finish({ error: new CordonError(`cordon serve: a terminal message over ${MAX_MESSAGE} bytes`) });
      if (this.buf.length < at + n) return;
      const payload = this.buf.subarray(at, at + n);
      this.buf = this.buf.subarray(at + n);
      const op = b0 & 0x0f;
      const fin = (b0 & 0x80) !== 0;
      if (op === 0x8) return this.finish({ error: new CordonError("cordon serve: the terminal was closed without an outcome", { sandboxId: this.sandboxId }) });
      if (op === 0x9) {
        this.send(0xa, payload);
        continue;
      }
      if (op === 0xa) continue;
      if (op === 0x1 || op === 0x2) this.fragments = { op, parts: [payload], size: payload.length };
      else if (op === 0x0 && this.fragments) {
        this.fragments.parts.push(payload);
        this.fragments.size += payload.length;
        if (this.fragments.size > MAX_MESSAGE) return this.finish({ error: new CordonError(`cordon serve: a terminal message over ${MAX_MESSAGE} bytes`) });
      }
      if (!fin || !this.fragments) continue;
      const msg = { op: this.fragments.op, data: Buffer.concat(this.fragments.parts) };
      this.fragments = null;
      if (msg.op === 0x2) {
        if (this.onData) this.onData(new Uint8Array(msg.data));
        else if (!this.waited && this.earlyBytes + msg.data.length <= MAX_EARLY) {
          this.early.push(new Uint8Array(msg.data));
          this.earlyBytes += msg.data.length;
        }
        continue;
      }
      let m;
      try {
        m = JSON.parse(msg.data.toString("utf8"));
      } catch (err) {
        return this.finish({ error: new CordonError(`cordon serve: reading the terminal: ${err.message}`) });
      }
      if (m.type === "exit" && m.outcome) return this.finish({ outcome: m.outcome });
      if (m.type === "error") {
        return this.finish({ error: answerError(Number.isInteger(m.http_status) ? m.http_status : 409, String(m.error ?? ""), { sandboxId: this.sandboxId }) });
      }
    }
  }

  finish(done) {
    if (this.done) return;
    this.done = done;
    for (const w of this.waiters) {
      if (done.error) w.reject(done.error);
      else w.resolve(done.outcome);
    }
    this.waiters = [];
    this.socket.destroy();
  }
}

/** One sandbox of a cordon serve. */
export class Sandbox {
  constructor(connection, info) {
    this.connection = connection;
    this.info = info;
    this.sandboxId = info.id;
    this.commands = new Commands(this);
    this.files = new Files(this);
  }

  /**
   * Claims a sandbox of the token's agent (or of agent, which must be the
   * token's own) from cordon serve at url. envs are set for every command
   * (a command's own win); timeoutMs ends the sandbox, at most the agent's
   * max_lifetime, which holds without it.
   */
  static async create(opts = {}) {
    const conn = new Connection(opts);
    const req = opts.agent ? { agent: opts.agent } : {};
    if (opts.envs) req.env = opts.envs;
    if (opts.timeoutMs !== undefined) req.timeout = duration(opts.timeoutMs);
    const info = await conn.call("POST", `${API}/sandboxes`, req, opts.signal);
    return new Sandbox(conn, info);
  }

  /** A sandbox that exists already, by its id. */
  static async connect(sandboxId, opts = {}) {
    const conn = new Connection(opts);
    return new Sandbox(conn, await conn.call("GET", sandboxPath(sandboxId), undefined, opts.signal));
  }

  /** The sandboxes the token may see. */
  static async list(opts = {}) {
    return new Connection(opts).call("GET", `${API}/sandboxes`, undefined, opts.signal);
  }

  /** Describes the sandbox as the server has it now (its state, its counters). */
  async getInfo() {
    this.info = await this.connection.call("GET", sandboxPath(this.sandboxId));
    return this.info;
  }

  /** Whether the sandbox still runs. */
  async isRunning() {
    try {
      return (await this.getInfo()).state === "running";
    } catch (err) {
      if (err instanceof NotFoundError || err instanceof SandboxEndedError) return false;
      throw err;
    }
  }

  /** Restarts the sandbox's idle timeout (its agent's idle_timeout). */
  async keepAlive() {
    this.info = await this.connection.call("POST", sandboxPath(this.sandboxId, "/keepalive"));
    return this.info;
  }

  /**
   * Starts cmd (a string, run by sh -c; an argv; none: the server's shell)
   * on a pseudo-terminal of rows x cols, and answers its Terminal.
   */
  async terminal(cmd, opts = {}) {
    const q = new URLSearchParams();
    if (cmd !== undefined && cmd !== null) {
      for (const a of typeof cmd === "string" ? ["sh", "-c", cmd] : cmd) q.append("arg", a);
    }
    q.set("rows", String(opts.rows ?? 24));
    q.set("cols", String(opts.cols ?? 80));
    if (opts.cwd) q.set("dir", opts.cwd);
    if (opts.timeoutMs !== undefined) q.set("timeout", duration(opts.timeoutMs));
    return Terminal.open(this.connection, this.sandboxId, q.toString());
  }

  /**
   * A URL that opens port of the sandbox in a browser (no token needed) for
   * expiresInMs (default 15 minutes; at most an hour, never past the
   * sandbox's end).
   */
  async portUrl(port, opts = {}) {
    const req = { port };
    if (opts.expiresInMs !== undefined) req.expires_in = duration(opts.expiresInMs);
    const u = await this.connection.call("POST", sandboxPath(this.sandboxId, "/port-urls"), req, opts.signal);
    return this.connection.url + u.path;
  }

  /** Ends the sandbox and everything running in it. */
  async kill() {
    this.info = await this.connection.call("DELETE", sandboxPath(this.sandboxId));
    return this.info;
  }
}

export default Sandbox;
