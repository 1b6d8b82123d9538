// SPDX-License-Identifier: Apache-2.0
//
// Types of @cordon-sandbox/sdk (index.js): the client of cordon serve.

/**
 * What is done with a request refused with 429 (nothing was done): sent
 * again at most maxRetries times, each after the wait Retry-After asks
 * for (1 s when it says none, at most 10 s), as long as the waits add up
 * to at most maxWaitMs; onRetry is called before each wait. Then
 * RateLimitError. {maxRetries: 0} sends nothing again.
 */
export interface RetryPolicy {
  maxRetries?: number;
  maxWaitMs?: number;
  onRetry?: (attempt: number, waitMs: number, error: RateLimitError) => void;
}

/** The policy when none is given: 3 retries within 30 s. */
export declare const DEFAULT_RETRY_POLICY: Readonly<Required<Omit<RetryPolicy, "onRetry">>>;

/** The server when neither url nor $CORDON_URL names one: "http://127.0.0.1:8700". */
export declare const DEFAULT_URL: string;

/** The outcome statuses of a command a limit ended. */
export declare const LIMIT_STATUSES: ReadonlySet<string>;

/** Where the server is and who asks. */
export interface ConnectionOpts {
  /** cordon serve's URL, http://HOST:PORT (default: $CORDON_URL, else DEFAULT_URL). */
  url?: string;
  /** An agent's token (default: $CORDON_TOKEN). */
  token?: string;
  /** What is done with requests refused for their rate (default DEFAULT_RETRY_POLICY). */
  retry?: RetryPolicy;
  /** The fetch requests go through (default: the global one). */
  fetch?: typeof globalThis.fetch;
  /** Aborts the request. */
  signal?: AbortSignal;
}

export interface SandboxOpts extends ConnectionOpts {
  /** The agent whose profile the sandbox is built from; only the token's own (default). */
  agent?: string;
  /** Variables set for every command of the sandbox (a command's own envs win). */
  envs?: Record<string, string>;
  /** Ends the sandbox after this long; at most the agent's max_lifetime, which holds without it. */
  timeoutMs?: number;
}

/** A limit, as the outcome names it. */
export interface Limit {
  name: string;
  value: string;
  enforced_by?: string;
  used?: number;
  evidence?: string;
}

/** How a command ended: exactly cordon run's outcome (docs/OUTCOME.md). */
export interface Outcome {
  sandbox?: string;
  /** "ok", "exit_nonzero", "signaled", "timeout", "memory_limit", "output_limit", ... */
  status: string;
  exit_code: number;
  command_exit_code?: number;
  signal?: string;
  limit?: Limit;
  usage?: Record<string, unknown>;
  limits?: Limit[];
  egress?: Record<string, unknown>[];
  degraded?: string[];
  notes?: string[];
  error?: string;
  /** For exit_nonzero: the protected paths the command's stderr named with a refusal. */
  protected?: string[];
  /** In a reviewed or guarded workspace: what became of what the command wrote (docs/OUTCOME.md). */
  changes?: Changes;
  message: string;
  [field: string]: unknown;
}

/** What became of a command's writes in a reviewed or guarded workspace. */
export interface Changes {
  /** The sandbox's change set, where what waits is kept. */
  set: string;
  /** The changes that wait for review (held, or conflicts); digest names them. */
  entries: number;
  bytes: number;
  digest?: string;
  /** Guarded: the changes that landed on the host after the command. */
  landed?: number;
  conflicts?: number;
  /** Guarded: why nothing landed yet (a process of the sandbox still runs). */
  pending?: string;
  error?: string;
}

/** The sandbox as the server describes it. */
export interface SandboxInfo {
  id: string;
  agent: string;
  node?: string;
  profile: string;
  profile_sha256: string;
  created: string;
  warm: boolean;
  cold_start_ms?: number;
  /** "running", or "ended" with ended saying why. */
  state: string;
  ended?: string;
  commands: number;
  running: number;
  reviewed?: boolean;
  idle_expires: string;
  expires: string;
  session?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface RunOpts {
  /** Each piece of standard output, as text, as it comes. */
  onStdout?: (data: string) => void;
  /** Each piece of standard error, as text, as it comes. */
  onStderr?: (data: string) => void;
  /** Ends the command (not the sandbox) after this long; at most the profile's wall limit. */
  timeoutMs?: number;
  /** Variables set for the command. */
  envs?: Record<string, string>;
  /** The directory it runs in (absolute). */
  cwd?: string;
  /** Its standard input. */
  stdin?: string | Uint8Array;
  /** false: answer the result whatever the status, instead of throwing. */
  throwOnError?: boolean;
  /** Answer a CommandHandle as soon as the command started (onStdout/onStderr are not used: wait() gives the output). */
  background?: boolean;
  signal?: AbortSignal;
}

export interface CommandResult {
  /** The status cordon run would exit with: the command's own, 128+N for signal N, 124 for a timeout, 114-123 for another limit. */
  exitCode: number;
  stdout: string;
  stderr: string;
  /** The outcome's status. */
  status: string;
  outcome: Outcome;
}

/** A background command of a sandbox, as the server describes it. */
export interface CommandInfo {
  id: string;
  args: string[];
  started: string;
  state: "running" | "ended";
  outcome?: Outcome;
}

/** A command running in the background: wait() for its result, or kill() it. */
export declare class CommandHandle {
  readonly id: string;
  readonly args: string[];
  wait(opts?: { throwOnError?: boolean; signal?: AbortSignal }): Promise<CommandResult>;
  kill(opts?: { signal?: AbortSignal }): Promise<CommandInfo>;
}

export declare class Commands {
  /** Runs cmd (a string for sh -c, or an argv); throws LimitError or CommandExitError when it did not succeed. */
  run(cmd: string | readonly string[], opts: RunOpts & { background: true }): Promise<CommandHandle>;
  run(cmd: string | readonly string[], opts?: RunOpts): Promise<CommandResult>;
  /** The sandbox's background commands, oldest first. */
  list(opts?: { signal?: AbortSignal }): Promise<CommandInfo[]>;
  /** The background command id, started earlier. */
  connect(id: string): CommandHandle;
}

export interface EntryInfo {
  name: string;
  path: string;
  /** "file", "dir", "symlink" or "other". */
  type: string;
  size: number;
  /** Permission bits with setuid, setgid and sticky. */
  mode: number;
  modifiedTime: Date;
  /** A symlink's target; undefined for another type. */
  symlinkTarget?: string;
}

export declare class Files {
  read(path: string, opts?: { format?: "text"; signal?: AbortSignal }): Promise<string>;
  read(path: string, opts: { format: "bytes"; signal?: AbortSignal }): Promise<Uint8Array>;
  write(path: string, data: string | Uint8Array | ArrayBuffer, opts?: { mode?: number; signal?: AbortSignal }): Promise<EntryInfo>;
  list(path: string, opts?: { max?: number; signal?: AbortSignal }): Promise<EntryInfo[]>;
  /** The directory as a tar archive; an archive cut short throws. */
  readTar(path: string, opts?: { signal?: AbortSignal }): Promise<Uint8Array>;
  /** Extracts a tar archive into the directory (which must exist). */
  writeTar(path: string, data: Uint8Array | ArrayBuffer, opts?: { signal?: AbortSignal }): Promise<{ path: string; entries: number; bytes: number; archive_bytes: number }>;
  /** Removes the file, link or directory (with everything in it). */
  remove(path: string, opts?: { signal?: AbortSignal }): Promise<void>;
  rename(oldPath: string, newPath: string, opts?: { signal?: AbortSignal }): Promise<void>;
  /** Makes the directory with its parents; false when it was there already. */
  makeDir(path: string, opts?: { signal?: AbortSignal }): Promise<boolean>;
  /** The entry (a link not followed); NotFoundError when there is none. */
  getInfo(path: string, opts?: { signal?: AbortSignal }): Promise<EntryInfo>;
  exists(path: string, opts?: { signal?: AbortSignal }): Promise<boolean>;
  /** Watches the directory (its subdirectories too, with recursive); answers once the watch is in place. */
  watchDir(
    path: string,
    onEvent: (event: FilesystemEvent) => void,
    opts?: { recursive?: boolean; onExit?: (reason?: string) => void; signal?: AbortSignal },
  ): Promise<WatchHandle>;
}

/** A change under a watched directory. */
export interface FilesystemEvent {
  /** "create", "write", "remove", "rename" (moved away, under its old name), "chmod" or "overflow" (changes were lost). */
  type: string;
  /** The entry's path relative to the directory ("" for the directory itself). */
  name: string;
  isDir: boolean;
}

export declare class WatchHandle {
  /** Why the server ended the watch, once it did; undefined when it was stopped here. */
  endReason?: string;
  /** Waits for the watch to end; answers endReason. */
  wait(): Promise<string | undefined>;
  stop(): Promise<void>;
}

export declare class Sandbox {
  readonly sandboxId: string;
  /** As the server last described it. */
  info: SandboxInfo;
  readonly commands: Commands;
  readonly files: Files;
  static create(opts?: SandboxOpts): Promise<Sandbox>;
  static connect(sandboxId: string, opts?: ConnectionOpts): Promise<Sandbox>;
  static list(opts?: ConnectionOpts): Promise<SandboxInfo[]>;
  getInfo(): Promise<SandboxInfo>;
  isRunning(): Promise<boolean>;
  keepAlive(): Promise<SandboxInfo>;
  /** Starts cmd (sh -c for a string; an argv; none: the server's shell) on a pseudo-terminal. */
  terminal(cmd?: string | readonly string[], opts?: { rows?: number; cols?: number; cwd?: string; timeoutMs?: number }): Promise<Terminal>;
  /** A URL that opens port in a browser, no token needed, for expiresInMs (default 15 minutes, at most an hour). */
  portUrl(port: number, opts?: { expiresInMs?: number; signal?: AbortSignal }): Promise<string>;
  kill(): Promise<SandboxInfo>;
}

/** A command on a pseudo-terminal in a sandbox. */
export declare class Terminal {
  /** Sends input (text as UTF-8, or bytes). */
  write(data: string | Uint8Array): void;
  resize(rows: number, cols: number): void;
  /** Sends a signal ("SIGINT", ...) to the command's process group. */
  signal(name: string): void;
  /** Reads until the command ends, output to onData as it comes; the outcome. */
  wait(opts?: { onData?: (data: Uint8Array) => void }): Promise<Outcome>;
  /** Ends the terminal, and so its command. */
  close(): void;
}

export default Sandbox;

/** Every error of the SDK (docs/SDK.md); httpStatus is the server's answer, when there was one. */
export declare class CordonError extends Error {
  httpStatus?: number;
  sandboxId?: string;
  constructor(message: string, opts?: { httpStatus?: number; sandboxId?: string });
}

/** 401: no valid token. */
export declare class AuthError extends CordonError {}

/** 403: not this token's to do, or a path the sandbox may not write. */
export declare class ForbiddenError extends CordonError {}

/** 404: no such sandbox (or not the token's agent's), or no such path in it. */
export declare class NotFoundError extends CordonError {}

/** 409: refused in the sandbox's state, or by its policy. */
export declare class ConflictError extends CordonError {}

/** 410: the sandbox has ended. */
export declare class SandboxEndedError extends CordonError {}

/** 413: a request over the server's bounds (a command's stdin, an upload). */
export declare class TooLargeError extends CordonError {}

/** 423: held for a person; send the very same request again once approvalId is approved. */
export declare class ApprovalRequiredError extends CordonError {
  approvalId?: string;
  constructor(message: string, opts?: { httpStatus?: number; sandboxId?: string; approvalId?: string });
}

/** 429, still, after the retry policy's tries. */
export declare class RateLimitError extends CordonError {
  /** The wait the server asked for last. */
  retryAfterMs?: number;
  constructor(message: string, opts?: { httpStatus?: number; sandboxId?: string; retryAfterMs?: number });
}

/** The command ran and its outcome is not ok: it exited with another status than 0, a signal or a limit ended it. */
export declare class CommandExitError extends CordonError {
  outcome: Outcome;
  /** The outcome's status: "exit_nonzero", "signaled", a limit's. */
  status: string;
  exitCode: number;
  stdout: string;
  stderr: string;
  constructor(result: CommandResult, sandboxId?: string);
}

/** A limit ended the command. */
export declare class LimitError extends CommandExitError {
  limit?: Limit;
}
