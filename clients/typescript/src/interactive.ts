// Interactive runs over the server's WebSocket (GET /api/sandbox/ws,
// subprotocol "sandbox-run.v1"): stdin is written while the program runs,
// its output arrives as events, then one result (or error) ends it.

import { SandboxRunError } from "./errors.js";
import type { OutputEvent, Result } from "./types.js";

/** The subprotocol of the server's WebSocket. */
export const WS_SUBPROTOCOL = "sandbox-run.v1";
/** The prefix of the subprotocol that carries an API key ("bearer.<key>"). */
export const WS_BEARER_PREFIX = "bearer.";
/** The WebSocket endpoint's path. */
export const WS_PATH = "/api/sandbox/ws";

/** What the client needs of a WebSocket: the browsers', Node 22's, or the ws package's. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  readonly bufferedAmount: number;
  readonly protocol: string;
  send(data: string | ArrayBufferLike | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (ev: any) => void): void;
}

/** A WebSocket constructor, as `new WebSocket(url, protocols)`. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

const OPEN = 1;
/** One stdin message's bytes at most (the server takes up to 1 MiB). */
const STDIN_CHUNK = 64 << 10;
/** write() waits while more than this is queued on the socket. */
const HIGH_WATER = 1 << 20;

interface ServerMessage {
  type: string;
  offset?: number;
  data?: string;
  encoding?: "base64";
  result?: Result;
  error?: string;
  status?: number;
  execution_id?: string;
}

/**
 * An interactive run: iterate `events` for its output as it happens
 * (stdout, stderr and compile chunks, in order), `write()` its stdin,
 * `closeStdin()` to give it EOF, and await `result` for the end.
 *
 * Events are kept until they are iterated (a WebSocket cannot be paused):
 * iterate them, or the output of a chatty program piles up in memory.
 * Breaking out of the iteration drops the events that follow; the run
 * goes on (use kill() or close() to end it).
 */
export class InteractiveSession {
  /** The run's result. It rejects with a SandboxRunError when the server refused or could not run the request, and with an Error when the connection ended first. */
  readonly result: Promise<Result>;
  /** The output events, ending when the run does. */
  readonly events: AsyncIterable<OutputEvent>;

  #ws: WebSocketLike;
  #queue: OutputEvent[] = [];
  #wake: (() => void) | undefined;
  #listening = true;
  #over = false; // a result or an error came, or the connection ended
  #closedByUs = false;
  #resolve!: (r: Result) => void;
  #reject!: (e: unknown) => void;

  /** @internal Use Client.interactive(). */
  constructor(ws: WebSocketLike, signal?: AbortSignal) {
    this.#ws = ws;
    this.result = new Promise<Result>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // Awaiting result is optional: its rejection is not "unhandled".
    this.result.catch(() => {});
    this.events = { [Symbol.asyncIterator]: () => this.#iterator() };
    ws.addEventListener("message", (ev: { data: unknown }) => this.#onMessage(ev.data));
    ws.addEventListener("close", (ev: { code?: number; reason?: string }) => {
      if (this.#closedByUs) this.#fail(new Error("the session was closed"));
      else this.#fail(new Error(`the connection ended before the result (close code ${ev.code ?? "?"}${ev.reason ? ": " + ev.reason : ""})`));
    });
    if (signal) {
      const onAbort = () => {
        this.#fail(signal.reason ?? new Error("aborted"));
        this.#ws.close();
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
      this.result.then(
        () => signal.removeEventListener("abort", onAbort),
        () => signal.removeEventListener("abort", onAbort),
      );
    }
  }

  #onMessage(data: unknown): void {
    if (this.#over || typeof data !== "string") return;
    let m: ServerMessage;
    try {
      m = JSON.parse(data) as ServerMessage;
    } catch (e) {
      this.#fail(new Error(`malformed message from the server: ${(e as Error).message}`));
      this.#ws.close();
      return;
    }
    switch (m.type) {
      case "stdout":
      case "stderr":
      case "compile": {
        if (!this.#listening) return;
        const ev: OutputEvent = { type: m.type, offset: m.offset ?? 0, data: m.data ?? "" };
        if (m.encoding) ev.encoding = m.encoding;
        this.#queue.push(ev);
        this.#notify();
        return;
      }
      case "result": {
        const res = m.result;
        if (!res) {
          this.#fail(new Error("the server sent a result without one"));
        } else if (res.status === "error_setup") {
          // As execute()'s 500: the sandbox could not be set up.
          this.#fail(new SandboxRunError(500, res.error ?? "", { executionId: res.execution_id, result: res }));
        } else {
          this.#over = true;
          this.#resolve(res);
          this.#notify();
        }
        return;
      }
      case "error":
        if (!m.status) this.#fail(new Error(`server: ${m.error ?? "the run was killed before it started"}`));
        else this.#fail(new SandboxRunError(m.status, m.error ?? "", { executionId: m.execution_id }));
        return;
    }
  }

  #fail(err: unknown): void {
    if (this.#over) return;
    this.#over = true;
    this.#reject(err);
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  async *#iterator(): AsyncGenerator<OutputEvent> {
    try {
      for (;;) {
        const ev = this.#queue.shift();
        if (ev) {
          yield ev;
          continue;
        }
        if (this.#over) return;
        await new Promise<void>((resolve) => (this.#wake = resolve));
      }
    } finally {
      if (!this.#over) {
        // The consumer stopped early: drop what follows.
        this.#listening = false;
        this.#queue = [];
      }
    }
  }

  /** The run is over (or its connection is). */
  get done(): boolean {
    return this.#over;
  }

  /**
   * Sends data to the program's stdin (a string as UTF-8). It resolves once
   * the socket has room again: a program that does not read its input
   * slows the writer down.
   */
  async write(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    for (let i = 0; i < bytes.length; i += STDIN_CHUNK) {
      this.#checkOpen();
      this.#ws.send(bytes.slice(i, i + STDIN_CHUNK));
      while (this.#ws.readyState === OPEN && this.#ws.bufferedAmount > HIGH_WATER && !this.#over) {
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  }

  /** Ends the program's input: it reads EOF after what was written. */
  closeStdin(): void {
    this.#send({ type: "eof" });
  }

  /** Ends the run: its result then has limit_reason "canceled" (nothing once the run is over). */
  kill(): void {
    if (this.#over || this.#ws.readyState !== OPEN) return;
    this.#ws.send(JSON.stringify({ type: "kill" }));
  }

  /** Closes the connection at once; a run still going is killed (result rejects). */
  close(): void {
    this.#closedByUs = true;
    this.#ws.close(1000);
    this.#fail(new Error("the session was closed"));
  }

  #send(msg: { type: string }): void {
    this.#checkOpen();
    this.#ws.send(JSON.stringify(msg));
  }

  #checkOpen(): void {
    if (this.#over || this.#ws.readyState !== OPEN) throw new Error("the session is over");
  }
}

/**
 * Opens the WebSocket and sends the request. Refusals of the handshake are
 * invisible to a WebSocket (browsers and Node give no HTTP status): probe
 * says what the server answers to a plain GET, which shows a bad key.
 */
export function openInteractive(
  WS: WebSocketConstructor,
  url: string,
  protocols: string[],
  first: string,
  probe: () => Promise<SandboxRunError | undefined>,
  signal?: AbortSignal,
): Promise<InteractiveSession> {
  signal?.throwIfAborted();
  const ws = new WS(url, protocols);
  ws.binaryType = "arraybuffer";
  // Listeners go on before the open event can fire.
  const session = new InteractiveSession(ws, signal);
  return new Promise<InteractiveSession>((resolve, reject) => {
    let settled = false;
    ws.addEventListener("open", () => {
      if (settled) return;
      settled = true;
      try {
        ws.send(first);
      } catch (e) {
        ws.close();
        reject(e);
        return;
      }
      resolve(session);
    });
    const failed = () => {
      if (settled) return;
      settled = true;
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      probe().then(
        (err) => reject(err ?? new Error(`the WebSocket handshake with ${url} failed`)),
        () => reject(new Error(`the WebSocket handshake with ${url} failed`)),
      );
    };
    ws.addEventListener("error", failed);
    ws.addEventListener("close", failed);
    signal?.addEventListener("abort", failed, { once: true });
  });
}
