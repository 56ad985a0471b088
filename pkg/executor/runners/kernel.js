// sandbox-run's JavaScript kernel: the long-lived interpreter of an
// interpreter session (Node, no dependencies). Commands come one per line
// on stdin, read by a worker thread (the main thread may be busy in a
// cell); each cell is answered with one line of JSON on descriptor 3. A
// cell's output goes to the real stdout and stderr as it comes (pipes are
// written synchronously on Linux), closed by the command's marker.
//
//   {"cell": "x + 1", "marker": "..."}   run a cell in the session's context
//   {"interrupt": true}                  stop the running cell (SIGINT)
//
// Declarations (let, const, function, class) live in one context from
// cell to cell; the value of a cell's last expression is its result
// (util.inspect), a promise's once settled.
"use strict";
const fs = require("fs");
const util = require("util");
const vm = require("vm");
const { Worker, isMainThread, parentPort } = require("worker_threads");

if (!isMainThread) {
  // The reader: commands to the main thread, interrupts as signals.
  let buf = "";
  const chunk = Buffer.alloc(64 * 1024);
  for (;;) {
    let n = 0;
    try {
      n = fs.readSync(0, chunk, 0, chunk.length, null);
    } catch (e) {
      if (e.code === "EAGAIN") continue;
      break;
    }
    if (n === 0) break;
    buf += chunk.toString("utf8", 0, n);
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let cmd;
      try {
        cmd = JSON.parse(line);
      } catch (e) {
        continue;
      }
      if (cmd.interrupt) {
        process.kill(process.pid, "SIGINT");
      } else {
        parentPort.postMessage(cmd);
      }
    }
  }
  parentPort.postMessage(null);
  return;
}

process.on("SIGINT", () => {}); // between cells an interrupt stops nothing
const context = vm.createContext({
  console, process, require, Buffer, setTimeout, setInterval, clearTimeout, clearInterval,
  setImmediate, clearImmediate, URL, URLSearchParams, TextEncoder, TextDecoder, structuredClone,
  fetch: globalThis.fetch, queueMicrotask,
});
let busy = Promise.resolve();

function answer(a, marker) {
  fs.writeSync(1, marker);
  fs.writeSync(2, marker);
  fs.writeSync(3, JSON.stringify(a) + "\n");
}

async function run(cmd) {
  const a = { status: "completed" };
  try {
    let value = vm.runInContext(cmd.cell || "", context, { filename: "<cell>", breakOnSigint: true });
    if (value && typeof value.then === "function") value = await value;
    if (value !== undefined) a.result = { "text/plain": util.inspect(value) };
  } catch (e) {
    a.status = "error";
    // The context's errors are its own realm's: not instances of ours.
    const isErr = e !== null && typeof e === "object" && typeof e.message === "string";
    const err = isErr ? e : { name: "Error", message: String(e), stack: "Uncaught " + util.inspect(e) };
    a.exception = { type: err.name || "Error", message: String(err.message), traceback: String(err.stack || err) };
    fs.writeSync(2, a.exception.traceback + "\n");
  }
  answer(a, cmd.marker || "");
}

const reader = new Worker(__filename);
reader.on("message", (cmd) => {
  if (cmd === null) {
    process.exit(0);
  }
  busy = busy.then(() => run(cmd));
});
