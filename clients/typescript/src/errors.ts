import type { ExceptionInfo, Result } from "./types.js";

const statusTexts: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  426: "Upgrade Required",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  507: "Insufficient Storage",
};

/**
 * An answer other than 2xx from the server (or an error the server sent
 * in place of a result on a stream or a WebSocket).
 */
export class SandboxRunError extends Error {
  /** The HTTP status (of an error event that ended a stream: the one the same failure answers without streaming). */
  readonly status: number;
  /** The server's own words (the "error" field, or the body's text). */
  readonly serverMessage: string;
  /** The server's Retry-After in seconds (429 and 503), if it sent one. */
  readonly retryAfter: number | undefined;
  /** The execution the error is about, when the server named one. */
  readonly executionId: string | undefined;
  /**
   * The result that came with the error: a sandbox that could not be set
   * up is a 500 with a result of status error_setup.
   */
  readonly result: Result | undefined;

  constructor(
    status: number,
    message: string,
    opts: { retryAfter?: number; executionId?: string; result?: Result } = {},
  ) {
    let text = `server answered ${status}${statusTexts[status] ? " " + statusTexts[status] : ""}`;
    if (message) text += ": " + message;
    if (opts.retryAfter) text += ` (retry after ${opts.retryAfter}s)`;
    super(text);
    this.name = "SandboxRunError";
    this.status = status;
    this.serverMessage = message;
    this.retryAfter = opts.retryAfter;
    this.executionId = opts.executionId;
    this.result = opts.result;
  }

  /** The server expects the request to be retried later (429 or 503). */
  get retryable(): boolean {
    return this.status === 429 || this.status === 503;
  }
}

/**
 * An entry point call (Client.call) that did not return: the exception
 * it raised, or the run's end (timeout, limit).
 */
export class CallError extends Error {
  readonly result: Result;
  readonly exception: ExceptionInfo | undefined;

  constructor(result: Result) {
    const ex = result.exception;
    super(ex ? `${ex.type}: ${ex.message}` : `call ${result.status}: ${result.error || "no return value"}`);
    this.name = "CallError";
    this.result = result;
    this.exception = ex;
  }
}

/** Reads Retry-After: delay-seconds or an HTTP date; undefined if neither. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (!v) return undefined;
  v = v.trim();
  if (/^\d+$/.test(v)) {
    const n = Number(v);
    return n > 0 ? Math.min(n, 86400) : undefined;
  }
  const t = Date.parse(v);
  if (!Number.isNaN(t) && t > now) return Math.round((t - now) / 1000);
  return undefined;
}

/**
 * The error of an answer other than 2xx: {"error", "execution_id"} when
 * the body is JSON, else its text, else the status.
 */
export function errorFromBody(status: number, headers: Headers | undefined, body: string): SandboxRunError {
  const retryAfter = parseRetryAfter(headers?.get("Retry-After") ?? null);
  let message = "";
  let executionId: string | undefined;
  try {
    const obj = JSON.parse(body) as { error?: unknown; execution_id?: unknown };
    if (obj && typeof obj.error === "string" && obj.error) {
      message = obj.error;
      if (typeof obj.execution_id === "string" && obj.execution_id) executionId = obj.execution_id;
    }
  } catch {
    // not JSON
  }
  if (!message) {
    message = body.trim();
    if (message.length > 512) message = message.slice(0, 512) + "...";
  }
  if (!message) message = statusTexts[status] ?? "";
  return new SandboxRunError(status, message, { retryAfter, executionId });
}
