// Live sandboxes (/api/sandbox/sandboxes): sandboxes that stay up between
// calls, with processes and files, until they are killed or their timeout
// passes. Paths in a sandbox are relative to its home, /work, unless
// absolute. A sandbox that does not exist (or is another key's, or has
// ended) throws SandboxRunError with status 404.

import type { ClientOptions, RequestOptions } from "./client.js";
import { fromBase64 } from "./encoding.js";
import { errorFromBody, SandboxRunError } from "./errors.js";
import { readSSE } from "./sse.js";

const BASE = "/api/sandbox/sandboxes";
const JSON_TYPE = "application/json";

/** What a new sandbox is (POST /api/sandbox/sandboxes). */
export interface SandboxRequest {
  /** Languages whose toolchains it has (default: the server's, python, javascript and bash). */
  languages?: string[];
  /** E2B's name for a set of languages ("base", "code-interpreter-v1"), used when languages is empty. */
  template?: string;
  /** Every process's environment (under each process's own). */
  env?: Record<string, string>;
  metadata?: Record<string, string>;
  /** Its life in seconds from now (default: the server's live.default_timeout_seconds). */
  timeout_seconds?: number;
  /** The memory of all its processes together, in MiB. */
  memory_mb?: number;
  /**
   * What its network may reach (hosts, *.domains, IPs or CIDRs, each with an
   * optional :PORT), within the server's network.allow; default: no network.
   * `budgets` bounds the bytes (both ways, over all its connections) it may
   * move with what an entry of `allow` allows, by the entry as written there:
   * `{"*.pythonhosted.org:443": 200_000_000}`; past one, those connections
   * are reset and new ones refused.
   */
  network?: { allow: string[]; budgets?: Record<string, number> };
  /**
   * Names of the key's secrets (Client.putSecret) its processes use without
   * seeing them: each finds a placeholder in the environment variable of a
   * secret's name, which the server replaces with the value in HTTP(S)
   * requests to the secret's hosts (network must reach them).
   */
  secrets?: string[];
  /** An OCI image (allowed by the server's images.allow) whose root filesystem is the sandbox's; languages and template are then ignored. */
  image?: string;
  /** Its timeout pauses it instead of ending it; any call resumes it. */
  auto_pause?: boolean;
  /** A snapshot of the key's (snapshot()) whose files it starts with. */
  snapshot?: string;
  /** Its wall: "native", or "gvisor" (its forks carry its memory and running processes); default: gvisor for code-interpreter-v1 where the server has it, else native. */
  isolation?: string;
  /** Pauses it once nobody has used it for this many seconds (any call resumes it). */
  idle_pause_seconds?: number;
}

/** A sandbox's files kept at one moment (snapshot()). */
export interface SnapshotInfo {
  id: string;
  names: string[];
  sandbox_id: string;
  created_at: string;
  size_bytes: number;
  /** It keeps the sandbox's running processes and memory too (a sandbox under gVisor). */
  memory?: boolean;
}

/** A live sandbox as the API shows it. */
export interface SandboxInfo {
  id: string;
  template?: string;
  languages?: string[];
  metadata?: Record<string, string>;
  memory_mb: number;
  /** RFC 3339 times. */
  started_at: string;
  end_at: string;
  /** "running", or "paused" (pause()). */
  state: string;
  /** Its timeout pauses it instead of ending it. */
  auto_pause?: boolean;
  /** What its network may reach (absent: nothing; setNetwork() changes it). */
  network?: string[];
  /** The bytes its network may move by entry of network (absent: no bound). */
  network_budgets?: Record<string, number>;
  /** The names of the secrets its processes use (placeholders in their environment). */
  secrets?: string[];
  /** The OCI image its root is (absent: the host's toolchains). */
  image?: string;
  /** Its wall: "native" or "gvisor". */
  isolation?: string;
  /** It was forked with its parent's memory and running processes. */
  forked_memory?: boolean;
  /** It is paused once nobody has used it for that long (absent: never). */
  idle_pause_seconds?: number;
  /** Paused and written to disk, its memory given back (pause({evict: true})); any call brings it back. */
  evicted?: boolean;
  /** Only in create()'s answer. */
  access_token?: string;
}

/** A process that ended. */
export interface ProcessResult {
  pid: number;
  /** -1 (with status "signal: ...") when a signal killed it; absent when the sandbox ended first (error says so). */
  exit_code?: number;
  /** How it ended: "exit status 3", "signal: killed". */
  status?: string;
  /** Its output, as text. */
  stdout: string;
  stderr: string;
  /** Its timeout killed it. */
  timed_out?: boolean;
  error?: string;
}

/** A process running in a sandbox. */
export interface ProcessInfo {
  pid: number;
  args: string[];
  cwd?: string;
  tag?: string;
  pty?: boolean;
}

/** A file, directory or symlink in a sandbox. */
export interface FileEntry {
  name: string;
  /** Its absolute path. */
  path: string;
  type: "file" | "dir" | "symlink";
  size: number;
  /** As ls shows it: -rw-r--r--. */
  mode: string;
  mod_time: string;
  target?: string;
}

/** Options of Sandbox.exec(). */
export interface ExecOptions extends RequestOptions {
  /** Its working directory (default /work). */
  cwd?: string;
  env?: Record<string, string>;
  /** Kill it after this many seconds (the result's timed_out). */
  timeout?: number;
  /** Its whole standard input (otherwise it reads end-of-file). */
  stdin?: string | Uint8Array;
  /** Its stdout as it comes (text). */
  onStdout?: (data: string) => void;
  /** Its stderr as it comes (text). */
  onStderr?: (data: string) => void;
  /** Run it on a terminal of this size: its output is then the terminal's, given as stdout. */
  pty?: { cols: number; rows: number };
}

/** Options of Sandbox.start(). */
export interface StartOptions extends RequestOptions {
  cwd?: string;
  env?: Record<string, string>;
  timeout?: number;
  /** Keep its standard input open for sendStdin(). */
  stdin?: boolean;
  tag?: string;
}

/** Options of Sandbox.follow(). */
export interface FollowOptions extends RequestOptions {
  onStdout?: (data: string) => void;
  onStderr?: (data: string) => void;
}

/** What Sandbox.files.write() takes. */
export type FileContent = string | Uint8Array | ArrayBuffer | Blob;

/** How a Sandbox reaches its server. */
class Conn {
  readonly baseUrl: string;
  #apiKey: string | undefined;
  #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    if (typeof options?.baseUrl !== "string") throw new TypeError("Sandbox: { baseUrl } is required");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#apiKey = options.apiKey || undefined;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch: pass { fetch } in the options");
    this.#fetch = (input, init) => f(input, init);
  }

  async send(method: string, path: string, opts: RequestOptions, body?: BodyInit, contentType?: string, accept = JSON_TYPE): Promise<Response> {
    const headers: Record<string, string> = { Accept: accept };
    if (contentType) headers["Content-Type"] = contentType;
    if (this.#apiKey) headers["Authorization"] = "Bearer " + this.#apiKey;
    const init: RequestInit = { method, headers };
    if (body !== undefined) init.body = body;
    if (opts.signal) init.signal = opts.signal;
    const resp = await this.#fetch(this.baseUrl + path, init);
    if (!resp.ok) throw errorFromBody(resp.status, resp.headers, await resp.text());
    return resp;
  }

  async json<T>(method: string, path: string, opts: RequestOptions, input?: unknown): Promise<T> {
    const resp =
      input === undefined ? await this.send(method, path, opts) : await this.send(method, path, opts, JSON.stringify(input), JSON_TYPE);
    const text = await resp.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }
}

/**
 * A live sandbox: made by Sandbox.create(), found by Sandbox.connect() or
 * Sandbox.list(). Every method takes the options of a Client (baseUrl,
 * apiKey, fetch) once, at create or connect.
 *
 *     const sbx = await Sandbox.create({ baseUrl: "http://127.0.0.1:8080" });
 *     const res = await sbx.exec("echo hello > f.txt; cat f.txt");
 *     await sbx.kill();
 */
export class Sandbox {
  /** The sandbox as the server last showed it (end_at follows setTimeout()). */
  info: SandboxInfo;
  /** Its files. */
  readonly files: SandboxFiles;
  #conn: Conn;

  private constructor(conn: Conn, info: SandboxInfo) {
    this.#conn = conn;
    this.info = info;
    this.files = new Files(conn, info.id);
  }

  /** Its id. */
  get id(): string {
    return this.info.id;
  }

  /** Creates a live sandbox. */
  static async create(options: ClientOptions, req: SandboxRequest = {}, opts: RequestOptions = {}): Promise<Sandbox> {
    const conn = new Conn(options);
    return new Sandbox(conn, await conn.json<SandboxInfo>("POST", BASE, opts, req));
  }

  /** A live sandbox by its id (SandboxRunError 404 when there is none). */
  static async connect(options: ClientOptions, id: string, opts: RequestOptions = {}): Promise<Sandbox> {
    const conn = new Conn(options);
    return new Sandbox(conn, await conn.json<SandboxInfo>("GET", BASE + "/" + encodeURIComponent(id), opts));
  }

  /** The key's snapshots (of sandboxId only, when given), oldest first. */
  static async listSnapshots(options: ClientOptions, sandboxId?: string, opts: RequestOptions = {}): Promise<SnapshotInfo[]> {
    const q = sandboxId ? "?sandbox_id=" + encodeURIComponent(sandboxId) : "";
    return (await new Conn(options).json<{ snapshots: SnapshotInfo[] }>("GET", "/api/sandbox/snapshots" + q, opts)).snapshots ?? [];
  }

  /** Deletes one of the key's snapshots (SandboxRunError 404 when there is none). */
  static async deleteSnapshot(options: ClientOptions, snapshotId: string, opts: RequestOptions = {}): Promise<void> {
    await new Conn(options).json<unknown>("DELETE", "/api/sandbox/snapshots/" + encodeURIComponent(snapshotId), opts);
  }

  /** The key's live sandboxes. */
  static async list(options: ClientOptions, opts: RequestOptions = {}): Promise<SandboxInfo[]> {
    return (await new Conn(options).json<{ sandboxes: SandboxInfo[] }>("GET", BASE, opts)).sandboxes ?? [];
  }

  /** The sandbox as the server has it now (and info updated). */
  async refresh(opts: RequestOptions = {}): Promise<SandboxInfo> {
    const token = this.info.access_token;
    this.info = await this.#conn.json<SandboxInfo>("GET", this.#path(""), opts);
    if (token && !this.info.access_token) this.info.access_token = token;
    return this.info;
  }

  /** Ends the sandbox and everything in it. */
  async kill(opts: RequestOptions = {}): Promise<void> {
    await this.#conn.json("DELETE", this.#path(""), opts);
  }

  /** Makes it end `seconds` from now (sooner or later than it would have). */
  async setTimeout(seconds: number, opts: RequestOptions = {}): Promise<void> {
    const got = await this.#conn.json<SandboxInfo>("POST", this.#path("/timeout"), opts, { timeout_seconds: seconds });
    this.info.end_at = got.end_at;
  }

  /**
   * Pauses it: its processes frozen where they are, its timeout stopped,
   * until resume() or any call that needs it running (SandboxRunError 409
   * when it is paused already). info.state follows. With `evict` it is
   * also written to disk, its memory given back (paused already is fine
   * then): under gVisor its processes come back where they were, otherwise
   * only its files do.
   */
  async pause(opts: RequestOptions & { evict?: boolean } = {}): Promise<void> {
    const body = opts.evict ? { evict: true } : undefined;
    this.#update(await this.#conn.json<SandboxInfo>("POST", this.#path("/pause"), opts, body));
  }

  /**
   * Resumes it if it is paused: its timeout is `seconds` from now, or what
   * was left of it when it was paused. info.state and info.end_at follow.
   */
  async resume(seconds?: number, opts: RequestOptions = {}): Promise<void> {
    const body = seconds === undefined ? undefined : { timeout_seconds: seconds };
    this.#update(await this.#conn.json<SandboxInfo>("POST", this.#path("/resume"), opts, body));
  }

  /**
   * Changes what its network may reach, at once and while it runs, to
   * `allow` (within the server's network.allow; empty: nothing at all); its
   * open connections the new list leaves out are reset. `budgets` bounds the
   * bytes it may move by entry of `allow`, as create's `network.budgets`
   * (none: no bound): an entry that keeps a budget keeps what it has moved.
   * info.network and info.network_budgets follow. A sandbox made without a
   * network cannot be given one, nor a budget an entry that `allow` lacks,
   * or of no bytes (SandboxRunError 400).
   */
  async setNetwork(allow: string[], opts: RequestOptions & { budgets?: Record<string, number> } = {}): Promise<void> {
    const body: { allow: string[]; budgets?: Record<string, number> } = { allow: [...allow] };
    if (opts.budgets && Object.keys(opts.budgets).length > 0) body.budgets = { ...opts.budgets };
    const got = await this.#conn.json<SandboxInfo>("PUT", this.#path("/network"), opts, body);
    this.#update(got);
    this.info.network = got.network ?? [];
    this.info.network_budgets = got.network_budgets ?? {};
  }

  /**
   * Keeps its files (its home and /tmp) as a snapshot; create({snapshot: id})
   * starts a sandbox with them. It is frozen while they are copied.
   */
  async snapshot(name?: string, opts: RequestOptions = {}): Promise<SnapshotInfo> {
    return this.#conn.json<SnapshotInfo>("POST", this.#path("/snapshots"), opts, name ? { name } : undefined);
  }

  /**
   * Makes `count` sandboxes (1 to 100) with its files, each its own from
   * then on (processes are not carried). Throws SandboxRunError when one
   * could not be made.
   */
  async fork(count = 1, timeoutSeconds?: number, opts: RequestOptions = {}): Promise<Sandbox[]> {
    const body: Record<string, unknown> = { count };
    if (timeoutSeconds !== undefined) body["timeout_seconds"] = timeoutSeconds;
    const got = await this.#conn.json<{ children: { sandbox?: SandboxInfo; error?: string }[] }>("POST", this.#path("/fork"), opts, body);
    return got.children.map((ch) => {
      if (!ch.sandbox) throw new SandboxRunError(500, "a child of the fork: " + (ch.error ?? "none"));
      return new Sandbox(this.#conn, ch.sandbox);
    });
  }

  #update(got: SandboxInfo): void {
    this.info.state = got.state;
    this.info.end_at = got.end_at;
    this.info.evicted = got.evicted;
  }

  /**
   * Runs a process and waits for its end: a string runs through
   * `bash -l -c`, an array is an argv. onStdout and onStderr get its
   * output as it comes; the result has all of it too. A process that
   * cannot start (no such program) throws SandboxRunError (400).
   */
  async exec(command: string | string[], opts: ExecOptions = {}): Promise<ProcessResult> {
    const body = processBody(command, opts);
    if (opts.stdin !== undefined) body["stdin"] = true;
    if (opts.pty) body["pty"] = { cols: opts.pty.cols, rows: opts.pty.rows };
    const resp = await this.#conn.send("POST", this.#path("/processes"), opts, JSON.stringify(body), JSON_TYPE, "text/event-stream");
    const stdin = opts.stdin;
    return this.#events(resp, opts, stdin === undefined ? undefined : (pid) => this.sendStdin(pid, stdin, { close: true, signal: opts.signal }));
  }

  /** Starts a process in the background and returns its pid at once. */
  async start(command: string | string[], opts: StartOptions = {}): Promise<number> {
    const body = processBody(command, opts);
    body["background"] = true;
    if (opts.stdin) body["stdin"] = true;
    if (opts.tag) body["tag"] = opts.tag;
    return (await this.#conn.json<{ pid: number }>("POST", this.#path("/processes"), opts, body)).pid;
  }

  /** Waits for a running process's end, with its output from now on. */
  async follow(pid: number, opts: FollowOptions = {}): Promise<ProcessResult> {
    const resp = await this.#conn.send("GET", this.#path(`/processes/${pid}/events`), opts, undefined, undefined, "text/event-stream");
    return this.#events(resp, opts);
  }

  /** The processes running in it. */
  async processes(opts: RequestOptions = {}): Promise<ProcessInfo[]> {
    return (await this.#conn.json<{ processes: ProcessInfo[] }>("GET", this.#path("/processes"), opts)).processes ?? [];
  }

  /** Writes to the stdin of a process started with stdin: true; with close, its input then ends. */
  async sendStdin(pid: number, data: string | Uint8Array, opts: RequestOptions & { close?: boolean } = {}): Promise<void> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const path = this.#path(`/processes/${pid}/stdin`) + (opts.close ? "?close=true" : "");
    await (await this.#conn.send("POST", path, opts, bytes, "application/octet-stream")).text();
  }

  /** Sends a signal ("SIGTERM", "KILL", or a number) to a process. */
  async signal(pid: number, signal: string | number = "SIGTERM", opts: RequestOptions = {}): Promise<void> {
    await this.#conn.json("POST", this.#path(`/processes/${pid}/signal`), opts, { signal });
  }

  /** Reads a process's event stream to its "exit" event. */
  async #events(resp: Response, opts: FollowOptions, onStart?: (pid: number) => Promise<void>): Promise<ProcessResult> {
    const ct = resp.headers.get("Content-Type") ?? "";
    if (!ct.startsWith("text/event-stream") || !resp.body) {
      throw new Error(`the server answered ${ct || "nothing"}, not an event stream`);
    }
    const out = { stdout: [] as string[], stderr: [] as string[] };
    const pty = new TextDecoder("utf-8");
    let pid = 0;
    const emit = (stream: "stdout" | "stderr", text: string) => {
      if (!text) return;
      out[stream].push(text);
      (stream === "stdout" ? opts.onStdout : opts.onStderr)?.(text);
    };
    for await (const m of readSSE(resp.body)) {
      let data: Record<string, unknown>;
      try {
        data = JSON.parse(m.data) as Record<string, unknown>;
      } catch {
        continue;
      }
      switch (m.event) {
        case "start":
          pid = Number(data["pid"]) || 0;
          if (onStart) await onStart(pid);
          break;
        case "stdout":
        case "stderr":
          // Output that is not UTF-8 text comes as base64.
          emit(m.event, data["encoding"] === "base64"
            ? new TextDecoder().decode(fromBase64(String(data["data"] ?? "")))
            : String(data["data"] ?? ""));
          break;
        case "pty":
          emit("stdout", pty.decode(fromBase64(String(data["data"] ?? "")), { stream: true }));
          break;
        case "exit": {
          emit("stdout", pty.decode());
          const res = data as unknown as ProcessResult;
          res.pid = res.pid || pid;
          res.stdout = out.stdout.join("");
          res.stderr = out.stderr.join("");
          return res;
        }
      }
    }
    throw new Error("the event stream ended before the process did");
  }

  #path(suffix: string): string {
    return BASE + "/" + encodeURIComponent(this.info.id) + suffix;
  }
}

/** The files of a sandbox (Sandbox.files). */
export interface SandboxFiles {
  /** The file's bytes. */
  read(path: string, opts?: RequestOptions): Promise<Uint8Array>;
  /** The file as UTF-8 text. */
  readText(path: string, opts?: RequestOptions): Promise<string>;
  /** Writes the file (its directories are made; one that is there is replaced). At most 64 MiB. */
  write(path: string, content: FileContent, opts?: RequestOptions): Promise<FileEntry>;
  /** A directory's entries ("" is /work), to depth levels below it. */
  list(path?: string, depth?: number, opts?: RequestOptions): Promise<FileEntry[]>;
  /** The file, directory or symlink at path. */
  stat(path: string, opts?: RequestOptions): Promise<FileEntry>;
  /** Whether something is at path. */
  exists(path: string, opts?: RequestOptions): Promise<boolean>;
  /** Makes a directory, with its parents. */
  mkdir(path: string, opts?: RequestOptions): Promise<FileEntry>;
  /** Renames a file or directory; returns it where it is now. */
  move(from: string, to: string, opts?: RequestOptions): Promise<FileEntry>;
  /** Removes a file, or a directory with all it holds. */
  remove(path: string, opts?: RequestOptions): Promise<void>;
}

class Files implements SandboxFiles {
  #conn: Conn;
  #id: string;

  constructor(conn: Conn, id: string) {
    this.#conn = conn;
    this.#id = id;
  }

  #path(suffix: string, query: Record<string, string | number | undefined> = {}): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") q.set(k, String(v));
    const qs = q.toString();
    return BASE + "/" + encodeURIComponent(this.#id) + "/files" + suffix + (qs ? "?" + qs : "");
  }

  /** The file's bytes. */
  async read(path: string, opts: RequestOptions = {}): Promise<Uint8Array> {
    const resp = await this.#conn.send("GET", this.#path("", { path }), opts, undefined, undefined, "application/octet-stream");
    return new Uint8Array(await resp.arrayBuffer());
  }

  /** The file as UTF-8 text. */
  async readText(path: string, opts: RequestOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.read(path, opts));
  }

  /** Writes the file (its directories are made; one that is there is replaced). At most 64 MiB. */
  async write(path: string, content: FileContent, opts: RequestOptions = {}): Promise<FileEntry> {
    const body: BodyInit = typeof content === "string" ? new TextEncoder().encode(content) : content;
    const resp = await this.#conn.send("PUT", this.#path("", { path }), opts, body, "application/octet-stream");
    return JSON.parse(await resp.text()) as FileEntry;
  }

  /** A directory's entries ("" is /work), to depth levels below it. */
  async list(path = "", depth = 1, opts: RequestOptions = {}): Promise<FileEntry[]> {
    const q = { path, depth: depth === 1 ? undefined : depth };
    return (await this.#conn.json<{ entries: FileEntry[] }>("GET", this.#path("/list", q), opts)).entries ?? [];
  }

  /** The file, directory or symlink at path. */
  async stat(path: string, opts: RequestOptions = {}): Promise<FileEntry> {
    return this.#conn.json<FileEntry>("GET", this.#path("/stat", { path }), opts);
  }

  /** Whether something is at path. */
  async exists(path: string, opts: RequestOptions = {}): Promise<boolean> {
    try {
      await this.stat(path, opts);
      return true;
    } catch (e) {
      if ((e as { status?: number }).status === 404) return false;
      throw e;
    }
  }

  /** Makes a directory, with its parents. */
  async mkdir(path: string, opts: RequestOptions = {}): Promise<FileEntry> {
    return this.#conn.json<FileEntry>("POST", BASE + "/" + encodeURIComponent(this.#id) + "/files/mkdir", opts, { path });
  }

  /** Renames a file or directory; returns it where it is now. */
  async move(from: string, to: string, opts: RequestOptions = {}): Promise<FileEntry> {
    return this.#conn.json<FileEntry>("POST", BASE + "/" + encodeURIComponent(this.#id) + "/files/move", opts, { from, to });
  }

  /** Removes a file, or a directory with all it holds. */
  async remove(path: string, opts: RequestOptions = {}): Promise<void> {
    await this.#conn.json("DELETE", this.#path("", { path }), opts);
  }
}

function processBody(command: string | string[], opts: { cwd?: string; env?: Record<string, string>; timeout?: number }): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (typeof command === "string") body["command"] = command;
  else {
    if (command.length === 0) throw new TypeError("the command is empty");
    body["args"] = command.map(String);
  }
  if (opts.cwd !== undefined) body["cwd"] = opts.cwd;
  if (opts.env && Object.keys(opts.env).length > 0) body["env"] = opts.env;
  if (opts.timeout !== undefined) body["timeout_seconds"] = opts.timeout;
  return body;
}
