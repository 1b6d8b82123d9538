// SPDX-License-Identifier: Apache-2.0
//
// Type-checked (tsc -p test/tsconfig.json), never run: the declarations of
// index.d.ts describe the API as a TypeScript user writes it.

import Default, { ApprovalRequiredError, AuthError, CommandExitError, CordonError, DEFAULT_URL, LimitError, NotFoundError, RateLimitError, Sandbox } from "../index.js";
import type { CommandHandle, CommandInfo, CommandResult, EntryInfo, Outcome, RetryPolicy, SandboxInfo, Terminal } from "../index.js";

export async function example(url: string, token: string): Promise<void> {
  const retry: RetryPolicy = { maxRetries: 1, maxWaitMs: 5000, onRetry: (n: number, ms: number, e: RateLimitError) => void [n, ms, e.retryAfterMs] };
  const sandbox: Sandbox = await Sandbox.create({ url: url || DEFAULT_URL, token, agent: "builder", retry });
  const id: string = sandbox.sandboxId;
  const r: CommandResult = await sandbox.commands.run("make test", {
    onStdout: (s: string) => void s.length,
    onStderr: (s: string) => void s.length,
    timeoutMs: 30000,
    envs: { CI: "1" },
    cwd: "/workspace",
  });
  const code: number = r.exitCode;
  const o: Outcome = r.outcome;
  await sandbox.commands.run(["git", "status"], { stdin: new Uint8Array([1]), throwOnError: false });
  const text: string = await sandbox.files.read("/workspace/a.md");
  const bytes: Uint8Array = await sandbox.files.read("/workspace/a.md", { format: "bytes" });
  const w: EntryInfo = await sandbox.files.write("/workspace/a.md", "text", { mode: 0o644 });
  const entries: EntryInfo[] = await sandbox.files.list("/workspace");
  const made: boolean = await sandbox.files.makeDir("/workspace/out");
  const there: boolean = await sandbox.files.exists("/workspace/out");
  const one: EntryInfo = await sandbox.files.getInfo("/workspace/a.md");
  await sandbox.files.rename("/workspace/a.md", "/workspace/out/a.md");
  await sandbox.files.remove("/workspace/out");
  void [made, there, one.mode];
  const info: SandboxInfo = await sandbox.keepAlive();
  const page: string = await sandbox.portUrl(3000, { expiresInMs: 60000 });
  const bg: CommandHandle = await sandbox.commands.run("make serve", { background: true });
  const bgResult: CommandResult = await bg.wait({ throwOnError: false });
  const listed: CommandInfo[] = await sandbox.commands.list();
  void [bgResult.exitCode, listed.length, bg.id];
  const term: Terminal = await sandbox.terminal("bash", { rows: 40, cols: 120 });
  term.write("ls\n");
  term.resize(50, 132);
  const ended: Outcome = await term.wait({ onData: (b: Uint8Array) => void b.length });
  void ended;
  void page;
  const running: boolean = await sandbox.isRunning();
  const all: SandboxInfo[] = await Default.list({ url, token });
  const again: Sandbox = await Sandbox.connect(id, { url, token });
  await again.kill();
  try {
    await sandbox.commands.run("true");
  } catch (err) {
    if (err instanceof LimitError) {
      const status: string = err.status;
      const limit: string | undefined = err.limit?.name;
      const outcome: Outcome = err.outcome;
      void [status, limit, outcome];
    } else if (err instanceof CommandExitError) {
      void (err.exitCode + err.stdout.length);
    } else if (err instanceof ApprovalRequiredError) {
      const approval: string | undefined = err.approvalId;
      void approval;
    } else if (err instanceof AuthError || err instanceof NotFoundError) {
      const status: number | undefined = err.httpStatus;
      void status;
    } else if (err instanceof CordonError) {
      void err.message;
    }
  }
  void [code, o, text, bytes, w, entries, info, running, all];
}
