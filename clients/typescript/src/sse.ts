// A Server-Sent Events parser over a fetch body (a ReadableStream of
// bytes), as the WHATWG spec reads event streams: fields "event" and
// "data" (several data lines join with "\n"), comments (":") ignored, an
// event dispatched at a blank line. A line may be any length (a result
// event carries all the output on one line): a line is gathered in parts
// and joined once, never rescanned.

/** One dispatched event. */
export interface SSEMessage {
  event: string;
  data: string;
}

export async function* readSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  let parts: string[] = []; // the current line, in pieces
  let skipLF = false; // the last chunk ended in "\r": a "\n" next belongs to it
  let event = "";
  let data: string[] = [];
  let hasData = false;

  function* line(text: string): Generator<SSEMessage> {
    if (text === "") {
      if (hasData) yield { event: event || "message", data: data.join("\n") };
      event = "";
      data = [];
      hasData = false;
      return;
    }
    if (text.startsWith(":")) return;
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") {
      data.push(value);
      hasData = true;
    }
  }

  function* feed(chunk: string): Generator<SSEMessage> {
    let start = 0;
    if (skipLF && chunk.startsWith("\n")) start = 1;
    skipLF = false;
    for (let i = start; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      parts.push(chunk.slice(start, i));
      const text = parts.length === 1 ? parts[0]! : parts.join("");
      parts = [];
      yield* line(text);
      if (c === 13) {
        if (i + 1 === chunk.length) skipLF = true;
        else if (chunk.charCodeAt(i + 1) === 10) i++;
      }
      start = i + 1;
    }
    if (start < chunk.length) parts.push(chunk.slice(start));
  }

  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      yield* feed(decoder.decode(value, { stream: true }));
    }
    yield* feed(decoder.decode());
    // An event not ended by a blank line is dropped, as the spec says.
  } finally {
    // Also when the consumer stops early: cancelling the body closes the
    // connection, which makes the server kill the run.
    reader.cancel().catch(() => {});
  }
}
