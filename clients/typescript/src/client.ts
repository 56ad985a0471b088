import { toBase64 } from "./encoding.js";
import { CallError, SandboxRunError, errorFromBody } from "./errors.js";
import {
  InteractiveSession,
  WS_BEARER_PREFIX,
  WS_PATH,
  WS_SUBPROTOCOL,
  openInteractive,
  type WebSocketConstructor,
} from "./interactive.js";
import { readSSE } from "./sse.js";
import type {
  Event,
  ExecuteRequest,
  FileInfo,
  FileInput,
  Health,
  Job,
  JobStatus,
  LanguageInfo,
  OutputEvent,
  Result,
  Secret,
  SecretPut,
  SessionInfo,
  SessionRequest,
} from "./types.js";

/** How to reach a server. */
export interface ClientOptions {
  /** The server, e.g. "http://127.0.0.1:8080" (a path prefix is kept; "" is the page's own origin in a browser). */
  baseUrl: string;
  /** Sent as "Authorization: Bearer <key>" (and as the "bearer.<key>" subprotocol on the WebSocket). */
  apiKey?: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** The WebSocket constructor for interactive() (default: the global one; Node 20 has none without --experimental-websocket). */
  WebSocket?: WebSocketConstructor;
}

/** Options every call takes. */
export interface RequestOptions {
  /** Aborting it abandons the call; for a running execution, the server kills the run. */
  signal?: AbortSignal;
}

/** Options of Client.job(). */
export interface JobOptions extends RequestOptions {
  /** Hold the answer until the execution is over, or timeout seconds pass. */
  wait?: boolean;
  /** With wait: seconds to wait at most (the server caps it at its max_wait_seconds). */
  timeout?: number;
}

/** Options of Client.uploadFile(). */
export interface UploadOptions extends RequestOptions {
  /** The file's media type (metadata only; default: a Blob's type, or application/octet-stream). */
  contentType?: string;
  /** How long the server keeps the file (default: its file_ttl_seconds). */
  ttlSeconds?: number;
}

/** Options of Client.runCell(): the request's other fields, and the call's options. */
export interface CellOptions extends RequestOptions, Partial<Omit<ExecuteRequest, "code" | "session_id">> {}

/** Options of Client.interactive(). */
export interface InteractiveOptions extends RequestOptions {
  /** The WebSocket constructor (default: the client's, then the global one). */
  WebSocket?: WebSocketConstructor;
}

/** Content for uploadFile(). */
export type UploadContent = string | Uint8Array | ArrayBuffer | Blob;

const JSON_TYPE = "application/json";

/**
 * A client of one sandbox-run server (`sandbox-run serve`).
 *
 * Answers other than 2xx throw SandboxRunError (status, message,
 * retryAfter); network failures throw what fetch throws.
 */
export class Client {
  readonly baseUrl: string;
  #apiKey: string | undefined;
  #fetch: typeof fetch;
  #WebSocket: WebSocketConstructor | undefined;
  /** Languages of the sessions this client created or looked up, for runCell(). */
  #sessionLanguages = new Map<string, string>();

  constructor(options: ClientOptions) {
    if (typeof options?.baseUrl !== "string") throw new TypeError("new Client({ baseUrl }): baseUrl is required");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#apiKey = options.apiKey || undefined;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch: pass { fetch } to new Client()");
    // Called as a plain function: a browser's fetch refuses another `this`.
    this.#fetch = (input, init) => f(input, init);
    this.#WebSocket = options.WebSocket;
  }

  /** Runs code and waits for its result. A sandbox that could not be set up throws SandboxRunError (500) with the result attached. */
  async execute(req: ExecuteRequest, opts: RequestOptions = {}): Promise<Result> {
    if (req.async) throw new TypeError("execute() waits for the result: use submit() for an async execution");
    const resp = await this.#send("POST", "/api/sandbox/execute", opts, JSON.stringify(toWire(req)), JSON_TYPE);
    const text = await resp.text();
    if (resp.status === 202) {
      throw new Error("the server queued an asynchronous job: execute() waits for results, use submit()");
    }
    if (resp.ok) return JSON.parse(text) as Result;
    throw executeError(resp, text);
  }

  /**
   * Runs code with Server-Sent Events: yields its compile, stdout and
   * stderr chunks as the program writes them, then a last event
   * {type: "result", result}. The request is sent when iteration starts;
   * stopping the iteration early closes the connection, which kills the
   * run. An error event of the stream throws SandboxRunError.
   */
  async *stream(req: ExecuteRequest, opts: RequestOptions = {}): AsyncGenerator<Event, void, undefined> {
    if (req.async) throw new TypeError("stream() runs synchronously: use submit() for an async execution");
    const resp = await this.#send("POST", "/api/sandbox/execute", opts, JSON.stringify(toWire(req)), JSON_TYPE, "text/event-stream");
    const ct = resp.headers.get("Content-Type") ?? "";
    if (!resp.ok || !ct.startsWith("text/event-stream") || !resp.body) {
      const text = await resp.text();
      if (resp.status === 200 && ct.startsWith(JSON_TYPE)) {
        // Not streamed (a proxy, say): the whole result at once.
        yield { type: "result", result: JSON.parse(text) as Result };
        return;
      }
      throw executeError(resp, text);
    }
    for await (const m of readSSE(resp.body)) {
      switch (m.event) {
        case "stdout":
        case "stderr":
        case "compile": {
          const ev = JSON.parse(m.data) as OutputEvent;
          ev.type = m.event as OutputEvent["type"];
          yield ev;
          break;
        }
        case "result":
          yield { type: "result", result: JSON.parse(m.data) as Result };
          return;
        case "error": {
          let e: { error?: string; status?: number; execution_id?: string } = {};
          try {
            e = JSON.parse(m.data);
          } catch {
            e = { error: m.data };
          }
          // The status the same failure answers without streaming (200 from
          // a server that gives none).
          throw new SandboxRunError(e.status || 200, e.error ?? "", { executionId: e.execution_id });
        }
      }
    }
    throw new Error("the event stream ended without a result");
  }

  /** Queues an async execution (POST /api/sandbox/executions) and returns at once. */
  async submit(req: ExecuteRequest, opts: RequestOptions = {}): Promise<JobStatus> {
    return this.#json<JobStatus>("POST", "/api/sandbox/executions", opts, toWire(req));
  }

  /** An async execution's state: its status while queued or running, its result once done. */
  async job(id: string, opts: JobOptions = {}): Promise<Job> {
    let path = "/api/sandbox/executions/" + encodeURIComponent(id);
    if (opts.wait) {
      path += "?wait=true";
      if (opts.timeout !== undefined) path += "&timeout=" + encodeURIComponent(String(opts.timeout));
    }
    const body = await this.#json<JobStatus | Result>("GET", path, opts);
    if (body.status === "queued" || body.status === "running") return { done: false, status: body as JobStatus };
    return { done: true, result: body as Result };
  }

  /** Waits for an async execution's result (long polls of pollSeconds). */
  async wait(id: string, opts: RequestOptions & { pollSeconds?: number } = {}): Promise<Result> {
    for (;;) {
      const j = await this.job(id, { wait: true, timeout: opts.pollSeconds ?? 30, signal: opts.signal });
      if (j.done) return j.result;
    }
  }

  /**
   * Runs an entry point (req.entrypoint) and returns its return value. A
   * call that raised or did not return throws CallError (with the result).
   */
  async call<T = unknown>(req: ExecuteRequest, opts: RequestOptions = {}): Promise<T> {
    if (!req.entrypoint) throw new TypeError("call() needs a request with an entrypoint");
    const res = await this.execute(req, opts);
    if (!("return_value" in res)) throw new CallError(res);
    return res.return_value as T;
  }

  /** Stores a file on the server; use {file_id} in executions' code or files. */
  async uploadFile(name: string, content: UploadContent, opts: UploadOptions = {}): Promise<FileInfo> {
    const q = new URLSearchParams();
    if (name) q.set("name", name);
    if (opts.ttlSeconds !== undefined) q.set("ttl_seconds", String(opts.ttlSeconds));
    const qs = q.toString();
    let type = opts.contentType;
    if (!type && typeof Blob !== "undefined" && content instanceof Blob && content.type) type = content.type;
    const body: BodyInit = typeof content === "string" ? new TextEncoder().encode(content) : content;
    const resp = await this.#send("POST", "/api/sandbox/files" + (qs ? "?" + qs : ""), opts, body, type || "application/octet-stream");
    return parseAnswer<FileInfo>(resp);
  }

  /** A stored file's metadata. */
  async file(id: string, opts: RequestOptions = {}): Promise<FileInfo> {
    return this.#json<FileInfo>("GET", "/api/sandbox/files/" + encodeURIComponent(id), opts);
  }

  /** This key's stored files, oldest first. */
  async listFiles(opts: RequestOptions = {}): Promise<FileInfo[]> {
    return (await this.#json<{ files: FileInfo[] }>("GET", "/api/sandbox/files", opts)).files ?? [];
  }

  /** A stored file's bytes. */
  async fileContent(id: string, opts: RequestOptions = {}): Promise<Uint8Array> {
    return this.#bytes("/api/sandbox/files/" + encodeURIComponent(id) + "/content", opts);
  }

  /** Deletes a stored file. */
  async deleteFile(id: string, opts: RequestOptions = {}): Promise<void> {
    await this.#json("DELETE", "/api/sandbox/files/" + encodeURIComponent(id), opts);
  }

  /**
   * Stores a secret of this key, replacing one by that name (PUT
   * /api/sandbox/secrets/{name}): a run naming it (`secrets: [name]`) sees
   * a placeholder in the environment variable `name`, and the server's
   * egress sends `value` in its place to `hosts` only (with `header`, also
   * as that header: `{name: "Authorization", format: "Bearer {value}"}`).
   * The answer, as every listing, never holds the value.
   */
  async putSecret(name: string, secret: SecretPut, opts: RequestOptions = {}): Promise<Secret> {
    const body: SecretPut = { value: secret.value, hosts: secret.hosts };
    if (secret.header) body.header = secret.header;
    return this.#json<Secret>("PUT", "/api/sandbox/secrets/" + encodeURIComponent(name), opts, body);
  }

  /** This key's secrets: names, hosts and headers, never values. */
  async listSecrets(opts: RequestOptions = {}): Promise<Secret[]> {
    return (await this.#json<{ secrets: Secret[] }>("GET", "/api/sandbox/secrets", opts)).secrets ?? [];
  }

  /** Deletes one of this key's secrets (SandboxRunError 404 when it has none by that name). */
  async deleteSecret(name: string, opts: RequestOptions = {}): Promise<void> {
    await this.#json("DELETE", "/api/sandbox/secrets/" + encodeURIComponent(name), opts);
  }

  /** Starts a session: executions with its session_id share /work (or, with interpreter, one live interpreter). */
  async createSession(req: SessionRequest, opts: RequestOptions = {}): Promise<SessionInfo> {
    const info = await this.#json<SessionInfo>("POST", "/api/sandbox/sessions", opts, req);
    this.#sessionLanguages.set(info.session_id, info.language);
    return info;
  }

  /** A session, with the files it keeps in /work. */
  async session(id: string, opts: RequestOptions = {}): Promise<SessionInfo> {
    const info = await this.#json<SessionInfo>("GET", "/api/sandbox/sessions/" + encodeURIComponent(id), opts);
    this.#sessionLanguages.set(info.session_id, info.language);
    return info;
  }

  /** This key's live sessions, oldest first (without their files). */
  async listSessions(opts: RequestOptions = {}): Promise<SessionInfo[]> {
    return (await this.#json<{ sessions: SessionInfo[] }>("GET", "/api/sandbox/sessions", opts)).sessions ?? [];
  }

  /** One file a session keeps, by its path relative to /work. */
  async sessionFile(id: string, path: string, opts: RequestOptions = {}): Promise<Uint8Array> {
    return this.#bytes(`/api/sandbox/sessions/${encodeURIComponent(id)}/file?path=${encodeURIComponent(path)}`, opts);
  }

  /** Removes one file a session keeps. */
  async deleteSessionFile(id: string, path: string, opts: RequestOptions = {}): Promise<void> {
    await this.#json("DELETE", `/api/sandbox/sessions/${encodeURIComponent(id)}/file?path=${encodeURIComponent(path)}`, opts);
  }

  /** Ends a session and removes its files (after a running execution of it finishes). */
  async deleteSession(id: string, opts: RequestOptions = {}): Promise<void> {
    await this.#json("DELETE", "/api/sandbox/sessions/" + encodeURIComponent(id), opts);
    this.#sessionLanguages.delete(id);
  }

  /**
   * Runs code in a session: a cell of its interpreter (the result's
   * `result` is the last expression's value by MIME type, `display` what
   * it displayed, `exception` what it raised), or a run in its /work. The
   * language is the session's (looked up once if this client did not
   * create the session).
   */
  async runCell(sessionId: string, code: string, options: CellOptions = {}): Promise<Result> {
    const { signal, ...fields } = options;
    let language = fields.language ?? this.#sessionLanguages.get(sessionId);
    if (!language) language = (await this.session(sessionId, { signal })).language;
    return this.execute({ ...fields, language, code, session_id: sessionId }, { signal });
  }

  /** The languages the server can run. */
  async languages(opts: RequestOptions = {}): Promise<LanguageInfo[]> {
    return this.#json<LanguageInfo[]>("GET", "/api/sandbox/languages", opts);
  }

  /** Checks that the server answers (GET /healthz). */
  async health(opts: RequestOptions = {}): Promise<Health> {
    return this.#json<Health>("GET", "/healthz", opts);
  }

  /**
   * Starts req as an interactive run on the server's WebSocket, and
   * resolves once the request is sent (the program may still wait for a
   * worker). A refused handshake (a bad key) rejects with a
   * SandboxRunError; refusals of the request arrive through `result`.
   * In browsers the key travels as a subprotocol ("bearer.<key>"), so it
   * must be a valid header token (hex or base64url keys are).
   */
  async interactive(req: ExecuteRequest, opts: InteractiveOptions = {}): Promise<InteractiveSession> {
    const WS = opts.WebSocket ?? this.#WebSocket ?? (globalThis as unknown as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WS) {
      throw new Error(
        "interactive() needs a WebSocket and this runtime has none: pass { WebSocket } (e.g. from the ws package) " +
          "to new Client() or interactive(), or run Node 20 with --experimental-websocket (Node 22+ and browsers have one)",
      );
    }
    const protocols = [WS_SUBPROTOCOL];
    if (this.#apiKey) protocols.push(WS_BEARER_PREFIX + this.#apiKey);
    const first = JSON.stringify({ type: "execute", ...toWire(req) });
    const probe = async () => {
      // A plain GET: a bad key is 401/403 there too; a good one is 426.
      const resp = await this.#send("GET", WS_PATH, { signal: opts.signal });
      const text = await resp.text();
      return resp.status === 426 || resp.ok ? undefined : errorFromBody(resp.status, resp.headers, text);
    };
    return openInteractive(WS, wsURL(this.baseUrl), protocols, first, probe, opts.signal);
  }

  async #send(
    method: string,
    path: string,
    opts: RequestOptions,
    body?: BodyInit,
    contentType?: string,
    accept = JSON_TYPE,
  ): Promise<Response> {
    const headers: Record<string, string> = { Accept: accept };
    if (contentType) headers["Content-Type"] = contentType;
    if (this.#apiKey) headers["Authorization"] = "Bearer " + this.#apiKey;
    const init: RequestInit = { method, headers };
    if (body !== undefined) init.body = body;
    if (opts.signal) init.signal = opts.signal;
    return this.#fetch(this.baseUrl + path, init);
  }

  /** Sends in as JSON (when given) and decodes a 2xx answer (undefined when empty). */
  async #json<T>(method: string, path: string, opts: RequestOptions, input?: unknown): Promise<T> {
    const resp =
      input === undefined
        ? await this.#send(method, path, opts)
        : await this.#send(method, path, opts, JSON.stringify(input), JSON_TYPE);
    return parseAnswer<T>(resp);
  }

  async #bytes(path: string, opts: RequestOptions): Promise<Uint8Array> {
    const resp = await this.#send("GET", path, opts, undefined, undefined, "application/octet-stream");
    if (!resp.ok) throw errorFromBody(resp.status, resp.headers, await resp.text());
    return new Uint8Array(await resp.arrayBuffer());
  }
}

async function parseAnswer<T>(resp: Response): Promise<T> {
  const text = await resp.text();
  if (!resp.ok) throw errorFromBody(resp.status, resp.headers, text);
  return (text ? JSON.parse(text) : undefined) as T;
}

/** The error of an execution's answer: a 500 may carry a result (error_setup). */
function executeError(resp: Response, text: string): SandboxRunError {
  const err = errorFromBody(resp.status, resp.headers, text);
  if (resp.status === 500) {
    try {
      const res = JSON.parse(text) as Result;
      if (res && res.status && res.execution_id) {
        return new SandboxRunError(500, err.serverMessage, { executionId: res.execution_id, result: res });
      }
    } catch {
      // not a result
    }
  }
  return err;
}

/** The request as the server reads it: bytes become base64. */
function toWire(req: ExecuteRequest): Record<string, unknown> {
  const out: Record<string, unknown> = { ...req };
  if (req.input_data instanceof Uint8Array) {
    out["input_data"] = toBase64(req.input_data);
    out["input_data_encoding"] = "base64";
  }
  if (req.files) {
    const files: Record<string, unknown> = {};
    for (const [name, f] of Object.entries(req.files)) files[name] = wireFile(f);
    out["files"] = files;
  }
  return out;
}

function wireFile(f: FileInput): unknown {
  if (f instanceof Uint8Array) return { content: toBase64(f), encoding: "base64" };
  if (f instanceof ArrayBuffer) return { content: toBase64(new Uint8Array(f)), encoding: "base64" };
  return f;
}

/** The WebSocket URL of a base URL (relative ones resolve against the page). */
function wsURL(baseUrl: string): string {
  const loc = (globalThis as unknown as { location?: { href: string } }).location;
  const u = new URL(baseUrl + WS_PATH, loc?.href);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  return u.toString();
}
