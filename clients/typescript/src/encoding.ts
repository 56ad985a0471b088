// Bytes in JSON: outputs, events and files travel as text when they are
// UTF-8 and as base64 otherwise. These helpers give the bytes back
// (atob/btoa, TextEncoder and TextDecoder: in Node and in browsers).

import type { OutputEvent, OutputFile, Outcome } from "./types.js";

const utf8 = new TextEncoder();

/** Decodes standard base64 into bytes. */
export function fromBase64(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Encodes bytes as standard base64. */
export function toBase64(bytes: Uint8Array): string {
  let bin = "";
  const step = 0x8000;
  for (let i = 0; i < bytes.length; i += step) {
    bin += String.fromCharCode(...bytes.subarray(i, i + step));
  }
  return btoa(bin);
}

/** The bytes of data as the API sends it with an encoding ("base64", or text). */
export function decodeData(data: string, encoding?: string): Uint8Array {
  return encoding === "base64" ? fromBase64(data) : utf8.encode(data);
}

/** An output event's bytes, as the program wrote them. */
export function eventBytes(ev: OutputEvent): Uint8Array {
  return decodeData(ev.data, ev.encoding);
}

/** A result's (or a compile step's, or a test case's) stdout, as the program wrote it. */
export function stdoutBytes(res: Outcome): Uint8Array {
  return decodeData(res.stdout, res.stdout_encoding);
}

/** A result's stderr, as the program wrote it. */
export function stderrBytes(res: Outcome): Uint8Array {
  return decodeData(res.stderr, res.stderr_encoding);
}

/** An output file's bytes. */
export function outputFileBytes(file: OutputFile): Uint8Array {
  if (typeof file === "string") return utf8.encode(file);
  return decodeData(file.content, file.encoding);
}
