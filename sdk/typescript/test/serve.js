// SPDX-License-Identifier: Apache-2.0
//
// A real cordon serve for the tests: the binary $CORDON_BIN (else built
// from this repository with go), on a loopback port, with one agent whose
// profile sets low limits, and a token for it.

import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** The cordon binary: $CORDON_BIN, else one built into dir. */
function cordonBinary(dir) {
  if (process.env.CORDON_BIN) return process.env.CORDON_BIN;
  const bin = join(dir, "cordon");
  execFileSync("go", ["build", "-o", bin, "./cmd/cordon"], { cwd: repo, env: { ...process.env, CGO_ENABLED: "0" }, stdio: "inherit" });
  return bin;
}

/** A loopback TCP port nothing listens on. */
function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

/** The profile of the tests' agent: a private workspace, output cut at 4 KiB. */
export const profile = `version: 1
agent: sdk
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
  wall: 2m
  output: 4KiB
`;

/**
 * Starts cordon serve; answers {url, token, stop, skip}. skip is a reason
 * when this host cannot run sandboxes (then nothing was started).
 */
export async function startServe() {
  const dir = mkdtempSync(join(tmpdir(), "cordon-sdk-"));
  chmodSync(dir, 0o755);
  const bin = cordonBinary(dir);
  if (spawnSync(bin, ["doctor"], { stdio: "ignore" }).status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return { skip: "this host cannot run cordon sandboxes (cordon doctor)" };
  }
  const token = randomBytes(24).toString("hex");
  const sum = createHash("sha256").update(token).digest("hex");
  const port = await freePort();
  writeFileSync(join(dir, "sdk.yaml"), profile);
  writeFileSync(
    join(dir, "serve.yaml"),
    `listen: 127.0.0.1:${port}
agents:
  sdk:
    profile: sdk.yaml
tokens:
  - name: sdk-token
    agent: sdk
    sha256: ${sum}
`,
  );
  const args = ["serve", "--config", join(dir, "serve.yaml")];
  if (process.getuid() !== 0) args.push("--allow-degraded=cgroup");
  const env = { ...process.env, CORDON_STATE_DIR: join(dir, "state"), CORDON_AUDIT_LOG: join(dir, "audit", "audit.jsonl"), HOME: dir };
  const child = spawn(bin, args, { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout.on("data", (b) => (log += b));
  child.stderr.on("data", (b) => (log += b));
  const exited = new Promise((res) => child.on("exit", (code, signal) => res({ code, signal })));
  const url = `http://127.0.0.1:${port}`;
  // Bounded: 600 tries, 100 ms apart.
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`cordon serve exited:\n${log}`);
    try {
      const res = await fetch(`${url}/v1/health`);
      if (res.ok) break;
    } catch {
      // Not listening yet.
    }
    if (i >= 600) {
      child.kill("SIGKILL");
      throw new Error(`cordon serve did not answer:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    token,
    log: () => log,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      const end = await exited;
      rmSync(dir, { recursive: true, force: true });
      return end;
    },
  };
}
