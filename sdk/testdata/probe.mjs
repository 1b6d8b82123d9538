// What the TypeScript SDK makes of the answers of sdk/vocabulary_test.go's
// fake server, printed as one JSON document for the test to compare with
// the Go and Python SDKs and with sdk/vocabulary.json.
//
// usage: node probe.mjs URL SDK (SDK: the path of sdk/typescript/index.js)
// Durations are printed as the SDK gives them, in milliseconds.

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [url, sdkPath] = process.argv.slice(2);
const sdk = await import(pathToFileURL(sdkPath).href);
const { Sandbox, CordonError, DEFAULT_URL, DEFAULT_RETRY_POLICY } = sdk;
delete process.env.CORDON_URL;

/** The names of an object's properties and methods, its prototypes' too, as a user sees them. */
function members(obj) {
  const names = new Set(Object.keys(obj));
  for (let p = Object.getPrototypeOf(obj); p && p !== Object.prototype && p !== Error.prototype; p = Object.getPrototypeOf(p)) {
    for (const n of Object.getOwnPropertyNames(p)) if (n !== "constructor") names.add(n);
  }
  return [...names].filter((n) => !n.startsWith("_") && n !== "stack" && n !== "name").sort();
}

function errorDoc(err) {
  const chain = [];
  for (let c = err.constructor; c && c !== Error; c = Object.getPrototypeOf(c)) chain.push(c.name);
  const fields = [...new Set(["message", ...members(err)])].sort();
  const doc = { class: err.constructor.name, chain, fields };
  for (const f of fields) doc[f] = f === "outcome" ? { status: err.outcome?.status } : err[f];
  return doc;
}

async function run(fn) {
  try {
    return { result: await fn() };
  } catch (err) {
    if (!(err instanceof CordonError)) throw err;
    return { error: errorDoc(err) };
  }
}

const noRetry = { maxRetries: 0 };
const out = {
  defaults: { url: DEFAULT_URL, max_retries: DEFAULT_RETRY_POLICY.maxRetries, max_wait: DEFAULT_RETRY_POLICY.maxWaitMs },
  errors: {},
  exec: {},
};
for (const status of [400, 401, 403, 404, 409, 410, 413, 423, 429, 500, 503]) {
  out.errors[String(status)] = await run(async () => (await Sandbox.connect(`sb-${status}`, { url, token: "t", retry: noRetry })).info);
}

await Sandbox.create({ agent: "a", envs: { A: "1" }, timeoutMs: 90000, url, token: "t", retry: noRetry });
const sb = await Sandbox.connect("sb-ok", { url, token: "t", retry: noRetry });
for (const c of readFileSync(0, "utf8").split(/\s+/).filter(Boolean)) {
  out.exec[c] = await run(async () => {
    const r = await sb.commands.run([c]);
    return { fields: Object.keys(r).sort(), status: r.status, exit_code: r.exitCode, stdout: r.stdout, stderr: r.stderr };
  });
}

const entries = await sb.files.list("/d");
out.entries = entries.map((e) => ({
  name: e.name,
  path: e.path,
  type: e.type,
  size: e.size,
  mode: e.mode,
  modified_time: e.modifiedTime ? e.modifiedTime.toISOString().slice(0, 19) + "Z" : null,
  symlink_target: e.symlinkTarget ?? null,
}));
const done = async (fn) => {
  try {
    await fn();
    return "<nil>";
  } catch (err) {
    return String(err.message);
  }
};
const info = await sb.files.getInfo("/d/a.txt");
out.files = {
  info: {
    name: info.name,
    path: info.path,
    type: info.type,
    size: info.size,
    mode: info.mode,
    modified_time: info.modifiedTime.toISOString().slice(0, 19) + "Z",
    symlink_target: info.symlinkTarget ?? null,
  },
  exists: await sb.files.exists("/d/a.txt"),
  missing: await sb.files.exists("/d/missing"),
  made: await sb.files.makeDir("/d/new"),
  removed: await done(() => sb.files.remove("/d/old")),
  renamed: await done(() => sb.files.rename("/d/a.txt", "/d/b.txt")),
  port_url: await sb.portUrl(8080, { expiresInMs: 300000 }),
};
const h = await sb.commands.run(["bg"], { background: true });
const waited = await h.wait().then(
  () => ({ error: false }),
  (err) => ({ error: err instanceof sdk.CommandExitError, exitCode: err.exitCode, stdout: err.stdout }),
);
out.files.bg = { id: h.id, wait_error: waited.error, exit_code: waited.exitCode, stdout: waited.stdout, kill: await done(() => h.kill()) };
out.files.bg_listed = (await sb.commands.list()).length;
const tar = await sb.files.readTar("/d");
out.files.tar_sha256 = createHash("sha256").update(tar).digest("hex");
out.files.tar_cut = (await done(() => sb.files.readTar("/cut"))) !== "<nil>";
out.files.tar_entries = (await sb.files.writeTar("/d", tar)).entries;
const watched = [];
const watch = await sb.files.watchDir("/d", (e) => watched.push(e), { recursive: true });
const endReason = await watch.wait();
out.files.watch = { events: watched.map((e) => [e.type, e.name, e.isDir]), end_reason: endReason };
out.members = {
  Sandbox: [...new Set([...members(sb), ...["create", "connect", "list"].filter((n) => typeof Sandbox[n] === "function")])].sort(),
  Commands: members(sb.commands),
  Files: members(sb.files),
  EntryInfo: Object.keys(entries[0]).sort(),
  RetryPolicy: Object.keys(DEFAULT_RETRY_POLICY),
  Terminal: members(Object.create(sdk.Terminal.prototype)),
  CommandHandle: members(new sdk.CommandHandle(sb, "cmd-1", ["bg"])),
  WatchHandle: members(watch),
  FilesystemEvent: Object.keys(watched[0]).sort(),
};
out.listed = (await Sandbox.list({ url, token: "t" })).map((s) => s.id);

const told = [];
const retried = await run(async () => {
  const policy = { maxRetries: 2, maxWaitMs: 30000, onRetry: (attempt, waitMs, err) => told.push([attempt, waitMs, err.constructor.name]) };
  return (await Sandbox.connect("sb-429", { url, token: "t", retry: policy })).info;
});
if (told.length > 0) out.members.RetryPolicy.push("onRetry");
out.retry = { told, error: retried.error.class, retry_after: retried.error.retryAfterMs };
process.stdout.write(JSON.stringify(out));
