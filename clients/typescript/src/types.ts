// The types that travel between a client and a sandbox-run server, as
// pkg/wire defines them (field names are the API's JSON names).

/** A stored file (POST /api/sandbox/files) used in place of code or a file's content. */
export interface FileRef {
  file_id: string;
}

/**
 * An input file's content: text, bytes (sent as base64), the API's object
 * form, or a stored file.
 */
export type FileInput =
  | string
  | Uint8Array
  | ArrayBuffer
  | { content: string; encoding?: "utf-8" | "base64" }
  | FileRef;

/** Network access of a run: host names ("*.example.org"), IPs or CIDRs, with an optional ":PORT". */
export interface NetworkRequest {
  allow: string[];
}

/** One input of a test-case batch and what it should print. */
export interface TestCase {
  input_data?: string;
  expected_output?: string;
  args?: string[];
}

/**
 * What an execution calls instead of running the code as a script: a
 * method of a class (class_name + method_name, method_params) or a
 * function (function, params). Parameters are a JSON object (keyword
 * arguments in Python).
 */
export interface Entrypoint {
  class_name?: string;
  method_name?: string;
  method_params?: Record<string, unknown>;
  function?: string;
  params?: Record<string, unknown>;
}

/** The body of POST /api/sandbox/execute. */
export interface ExecuteRequest {
  language: string;
  /** The program, or a stored file holding it. */
  code: string | FileRef;
  /** Stdin. Bytes are sent as base64 (input_data_encoding is then set for you). */
  input_data?: string | Uint8Array;
  /** "base64" when input_data is base64 text. */
  input_data_encoding?: "base64" | "utf-8";
  /** Files put in /work before the run, by path. */
  files?: Record<string, FileInput>;
  /** Wall-time limit in seconds, or "auto" (learned from recent runs). */
  timeout_seconds?: number | "auto";
  max_memory_mb?: number;
  version?: string;
  /** Run in an OCI image's root filesystem (the server's images.allow decides). */
  image?: string;
  args?: string[];
  env?: Record<string, string>;
  cpu_time_seconds?: number;
  max_processes?: number;
  max_output_bytes?: number;
  max_file_size_bytes?: number;
  compile_timeout_seconds?: number;
  /** Paths or globs under /work whose files come back in output_files. */
  output_files?: string[];
  max_response_bytes?: number;
  network?: NetworkRequest;
  /**
   * Secrets of the key (Client.putSecret) the run uses without seeing
   * them: each is in its environment under its name as a placeholder,
   * which the server puts the value in place of in the run's HTTP and
   * HTTPS requests to the secret's hosts (give network with them).
   */
  secrets?: string[];
  /** Run in a session's persistent /work (or as a cell of its interpreter). */
  session_id?: string;
  /** Queue and answer 202 at once: use Client.submit() instead. */
  async?: boolean;
  callback_url?: string;
  test_cases?: TestCase[];
  /** exact, lines (default) or float. */
  compare?: "exact" | "lines" | "float";
  float_tolerance?: number;
  entrypoint?: Entrypoint;
}

/** The outcome of an execution. */
export type Status = "completed" | "error_runtime" | "timeout" | "error_compile" | "error_setup";

/** What one sandboxed step did: the run, or the compile. */
export interface Outcome {
  status: Status;
  /** Text, or base64 when stdout_encoding is "base64" (see stdoutBytes()). */
  stdout: string;
  stderr: string;
  stdout_encoding?: "base64";
  stderr_encoding?: "base64";
  exit_code: number;
  signal?: string;
  limit_reason?: string;
  duration_ms: number;
  cpu_time_ms: number;
  memory_used_mb: number;
}

/** The compile step's own outcome. */
export interface StepResult extends Outcome {
  /** No compiler ran: the outcome of an identical compile was reused. */
  cache_hit: boolean;
}

/** An output file that was not returned, and why. */
export interface SkippedFile {
  path: string;
  reason: string;
}

/** The outcome of one test case. */
export interface CaseResult extends Outcome {
  index: number;
  stdout_truncated: boolean;
  stderr_truncated?: boolean;
  /** accepted, wrong_answer, or the failure (error_runtime, timeout, ...). */
  verdict?: string;
}

export interface BatchSummary {
  total: number;
  accepted: number;
  failed: number;
}

/** What a called entry point or an interpreter cell raised. */
export interface ExceptionInfo {
  type: string;
  message: string;
  traceback: string;
}

/** One destination a run with network access tried to reach. */
export interface Destination {
  host: string;
  ip?: string;
  port?: number;
  protocol: "tcp" | "udp" | "dns";
  allowed: boolean;
  reason?: string;
  error?: string;
  connections: number;
  bytes_out: number;
  bytes_in: number;
}

/** One HTTP or HTTPS request of a run whose egress carried its requests (a run with secrets). */
export interface HTTPRequest {
  scheme: "http" | "https";
  /** The host the request named (its Host header). */
  host: string;
  method: string;
  /** The request's path and query as the program sent them: placeholders, never secrets. */
  path: string;
  /** The response's status (0: none came). */
  status: number;
  bytes_out: number;
  bytes_in: number;
  /** The secrets put in place of their placeholders in this request. */
  secrets?: string[];
  error?: string;
}

export interface NetworkReport {
  destinations: Destination[];
  allowed: number;
  denied: number;
  bytes_out: number;
  bytes_in: number;
  limit?: string;
  dropped?: number;
  /** The run's HTTP and HTTPS requests, when its egress carried them (a run with secrets). */
  requests?: HTTPRequest[];
  /** Requests left out of requests past its cap. */
  requests_dropped?: number;
}

/**
 * An output file as it travels: text, or an object with base64 content
 * (and, for a name that is not UTF-8, its real path in base64). Use
 * outputFileBytes() to get the bytes.
 */
export type OutputFile =
  | string
  | { content: string; encoding: "utf-8" | "base64"; path?: string; path_encoding?: "base64" };

/** A callback's delivery state (async executions with a callback_url). */
export interface CallbackStatus {
  status: "pending" | "delivered" | "failed";
  attempts: number;
  last_http_status?: number;
  error?: string;
  last_attempt_at?: string;
  next_attempt_at?: string;
  delivered_at?: string;
  failed_at?: string;
}

/** The result of an execution (POST /api/sandbox/execute's answer). */
export interface Result extends Outcome {
  execution_id: string;
  language?: string;
  version?: string;
  image?: string;
  image_digest?: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  output_files: Record<string, OutputFile> | null;
  skipped_files?: SkippedFile[];
  compile?: StepResult;
  test_cases?: CaseResult[];
  summary?: BatchSummary;
  /** Why the sandbox could not be set up, or why an entry point gave no value. */
  error?: string;
  /** An entry point's return value (null when it returned nothing). */
  return_value?: unknown;
  exception?: ExceptionInfo;
  /** An interpreter cell's last expression's value, by MIME type ("text/plain", "image/png" in base64, ...). */
  result?: Record<string, string>;
  /** What an interpreter cell displayed, each by MIME type. */
  display?: Record<string, string>[];
  /** The interpreter had to be started again (its state is lost). */
  restarted?: boolean;
  network?: NetworkReport;
  auto_timeout_seconds?: number;
  response_truncated?: boolean;
  // Async executions' results (GET /api/sandbox/executions/{id}) also have:
  created_at?: string;
  started_at?: string;
  finished_at?: string;
  callback?: CallbackStatus;
  result_truncated?: boolean;
  result_truncated_reason?: string;
}

/** A chunk of output as the program wrote it (SSE and WebSocket). */
export interface OutputEvent {
  type: "stdout" | "stderr" | "compile";
  /** The stream's bytes before this chunk. */
  offset: number;
  /** Text, or base64 when encoding is "base64" (see eventBytes()). */
  data: string;
  encoding?: "base64";
}

/** The last event of a stream. */
export interface ResultEvent {
  type: "result";
  result: Result;
}

/** What Client.stream() yields: output chunks, then the result. */
export type Event = OutputEvent | ResultEvent;

/** An async execution that is not over. */
export interface JobStatus {
  execution_id: string;
  status: "queued" | "running";
  created_at: string;
  started_at?: string;
  /** 1 is next. */
  queue_position?: number;
  callback?: CallbackStatus;
}

/** An async execution: its status while queued or running, its result once done. */
export type Job = { done: false; status: JobStatus } | { done: true; result: Result };

/** A stored file. */
export interface FileInfo {
  file_id: string;
  name?: string;
  content_type?: string;
  size: number;
  sha256: string;
  created_at: string;
  expires_at: string;
}

/** A header a secret is also sent in: name set to format with "{value}" replaced (none: the value alone). */
export interface SecretHeader {
  name: string;
  format?: string;
}

/** The body of PUT /api/sandbox/secrets/{name}. */
export interface SecretPut {
  /** The secret's value: sent to its hosts only, never answered back. */
  value: string;
  /** Where it may be sent: "api.example.com", "*.example.com" (subdomains), optionally with ":PORT". */
  hosts: string[];
  header?: SecretHeader;
}

/** A secret of the key as listed: never its value. */
export interface Secret {
  name: string;
  hosts: string[];
  header?: SecretHeader;
  created: string;
  updated: string;
}

/** Default limits of a session's executions. */
export interface SessionLimits {
  timeout_seconds?: number;
  cpu_time_seconds?: number;
  max_memory_mb?: number;
  max_processes?: number;
  max_output_bytes?: number;
  compile_timeout_seconds?: number;
}

/** The body of POST /api/sandbox/sessions. */
export interface SessionRequest extends SessionLimits {
  language: string;
  /** A live interpreter (python): variables persist from cell to cell. */
  interpreter?: boolean;
  image?: string;
  /** How long the session lives without executions. */
  ttl_seconds?: number;
  network?: NetworkRequest;
  /**
   * Secrets of the key the session's executions use without seeing them
   * (an interpreter's for its whole life; each cell gets the values the
   * store has as it starts); they need `network` with their hosts.
   */
  secrets?: string[];
}

/** One regular file a session keeps in /work. */
export interface SessionFile {
  path: string;
  size: number;
}

/** A session; files and bytes_used only from Client.session(). */
export interface SessionInfo extends SessionLimits {
  session_id: string;
  language: string;
  image?: string;
  interpreter?: boolean;
  ttl_seconds: number;
  created_at: string;
  last_used_at: string;
  expires_at: string;
  max_bytes: number;
  network?: NetworkRequest;
  /** The names of the secrets its executions use. */
  secrets?: string[];
  bytes_used?: number;
  files?: SessionFile[];
}

/** A set of execution limits. */
export interface LimitSet {
  timeout_seconds: number;
  cpu_time_seconds: number;
  memory_mb: number;
  processes: number;
  output_bytes: number;
  file_size_bytes: number;
  compile_timeout_seconds: number;
}

/** One installed version of a language. */
export interface LanguageVersion {
  version: string;
  available: boolean;
  default: boolean;
  compiled: boolean;
  default_limits: LimitSet;
}

/** One entry of GET /api/sandbox/languages (top-level fields describe the default version). */
export interface LanguageInfo {
  name: string;
  aliases: string[];
  extensions: string[];
  version: string;
  compiled: boolean;
  default_limits: LimitSet;
  versions: LanguageVersion[];
}

/** GET /healthz's answer. */
export interface Health {
  status: string;
}
