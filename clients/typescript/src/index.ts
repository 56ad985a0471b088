// @sandbox-run/client: a fetch-based client for the sandbox-run server.

export { Client } from "./client.js";
export type {
  CellOptions,
  ClientOptions,
  InteractiveOptions,
  JobOptions,
  RequestOptions,
  UploadContent,
  UploadOptions,
} from "./client.js";
export { CallError, SandboxRunError } from "./errors.js";
export { Sandbox } from "./sandbox.js";
export type {
  ExecOptions,
  FileContent,
  FileEntry,
  FollowOptions,
  ProcessInfo,
  ProcessResult,
  SandboxFiles,
  SandboxInfo,
  SandboxRequest,
  StartOptions,
} from "./sandbox.js";
export { InteractiveSession, WS_BEARER_PREFIX, WS_PATH, WS_SUBPROTOCOL } from "./interactive.js";
export type { WebSocketConstructor, WebSocketLike } from "./interactive.js";
export {
  decodeData,
  eventBytes,
  fromBase64,
  outputFileBytes,
  stderrBytes,
  stdoutBytes,
  toBase64,
} from "./encoding.js";
export type * from "./types.js";
