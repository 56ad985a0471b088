// The TypeScript SDK against a real server: SANDBOX_RUN_URL (and
// SANDBOX_RUN_API_KEY when the server has keys). Without SANDBOX_RUN_URL
// every test is skipped. Build first: npx tsc -p . (these import dist/).
//
//   SANDBOX_RUN_URL=http://127.0.0.1:8080 node --test test/

import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile, unlink, writeFile } from "node:fs/promises";
import http from "node:http";
import { fileURLToPath } from "node:url";
import path from "node:path";

import {
  CallError,
  Client,
  Sandbox,
  SandboxRunError,
  eventBytes,
  outputFileBytes,
  stderrBytes,
  stdoutBytes,
} from "../dist/index.js";

const url = process.env.SANDBOX_RUN_URL;
const apiKey = process.env.SANDBOX_RUN_API_KEY || undefined;
const skip = url ? false : "SANDBOX_RUN_URL is not set (the URL of a running sandbox-run serve)";
const pkgDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const text = (b) => new TextDecoder().decode(b);
const hasWebSocket = typeof globalThis.WebSocket === "function";
// The port of this machine the secrets' stand-in API listens on: the
// server (on this machine too) must allow host.sandbox.internal on it.
const port = Number(process.env.SANDBOX_RUN_TEST_PORT || 8000);

// A stand-in for the API a secret is for, on 127.0.0.1:port: keeps what
// each request carried (its Authorization header and target) and answers
// "upstream ok" (/big: 64 KiB).
async function upstream() {
  const got = [];
  const server = http.createServer((req, res) => {
    got.push([req.headers.authorization, req.url]);
    res.end(req.url === "/big" ? "x".repeat(65536) : "upstream ok");
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  return { got, close: () => new Promise((resolve) => server.close(resolve)) };
}

describe("@sandbox-run/client", { skip }, () => {
  const client = new Client({ baseUrl: url ?? "", apiKey });

  test("health and languages", async () => {
    assert.deepEqual(await client.health(), { status: "ok" });
    const langs = await client.languages();
    const py = langs.find((l) => l.name === "python");
    assert.ok(py, `no python in ${langs.map((l) => l.name)}`);
    assert.ok(langs.some((l) => l.name === "bash"));
    assert.equal(typeof py.version, "string");
    assert.ok(Array.isArray(py.aliases) && Array.isArray(py.versions));
    assert.ok(py.default_limits.timeout_seconds > 0);
  });

  test("execute: a result with all its fields", async () => {
    const res = await client.execute({ language: "python", code: "import sys\nprint('hello')\nprint('warn', file=sys.stderr)\nsys.exit(3)" });
    assert.equal(res.status, "error_runtime");
    assert.equal(res.exit_code, 3);
    assert.equal(res.stdout, "hello\n");
    assert.equal(res.stderr, "warn\n");
    assert.match(res.execution_id, /\S/);
    assert.equal(res.language, "python");
    assert.equal(res.stdout_truncated, false);
    assert.equal(res.stderr_truncated, false);
    for (const k of ["duration_ms", "cpu_time_ms", "memory_used_mb"]) assert.equal(typeof res[k], "number", k);
    assert.equal(res.stdout_encoding, undefined);
  });

  test("execute: stdin, args, env, files in and out (text and bytes)", async () => {
    const code = [
      "import os, sys",
      "line = sys.stdin.readline().strip()",
      "print(f\"{line}|{sys.argv[1]}|{os.environ['K']}\")",
      "print(open('in.txt').read(), end='')",
      "print(open('in.bin', 'rb').read().hex())",
      "open('out.bin', 'wb').write(b'\\x00\\xfe')",
      "open('out.txt', 'w').write('made\\n')",
    ].join("\n");
    const res = await client.execute({
      language: "python",
      code,
      input_data: new TextEncoder().encode("from stdin\n"),
      args: ["arg1"],
      env: { K: "v" },
      files: { "in.txt": "text file\n", "in.bin": new Uint8Array([0, 1, 0xff]) },
      output_files: ["out.bin", "out.txt"],
    });
    assert.equal(res.status, "completed", res.stderr);
    assert.equal(res.stdout, "from stdin|arg1|v\ntext file\n0001ff\n");
    assert.deepEqual([...outputFileBytes(res.output_files["out.bin"])], [0, 0xfe]);
    assert.equal(text(outputFileBytes(res.output_files["out.txt"])), "made\n");
  });

  test("an unknown language is a 400 SandboxRunError", async () => {
    const err = await client.execute({ language: "no-such-language", code: "x" }).catch((e) => e);
    assert.ok(err instanceof SandboxRunError, String(err));
    assert.ok(err instanceof Error);
    assert.equal(err.status, 400);
    assert.match(err.serverMessage, /no-such-language/);
    assert.match(err.message, /^server answered 400/);
    assert.equal(err.retryable, false);
    assert.equal(err.retryAfter, undefined);
    // The same from a stream, a job and a request the server cannot parse.
    const streamErr = await (async () => {
      for await (const _ of client.stream({ language: "no-such-language", code: "x" })) {
        // nothing
      }
    })().catch((e) => e);
    assert.ok(streamErr instanceof SandboxRunError && streamErr.status === 400, String(streamErr));
    const submitErr = await client.submit({ language: "no-such-language", code: "x" }).catch((e) => e);
    assert.ok(submitErr instanceof SandboxRunError && submitErr.status === 400, String(submitErr));
    const badField = await client.execute({ language: "bash", code: "true", nope: 1 }).catch((e) => e);
    assert.ok(badField instanceof SandboxRunError && badField.status === 400, String(badField));
    await assert.rejects(client.execute({ language: "bash", code: "true", async: true }), TypeError);
  });

  test("output that is not UTF-8 travels as base64", async () => {
    const res = await client.execute({ language: "python", code: "import sys\nsys.stdout.buffer.write(b'\\xff')\nsys.stderr.buffer.write(b'ok')" });
    assert.equal(res.status, "completed");
    assert.equal(res.stdout_encoding, "base64");
    assert.equal(res.stdout, "/w==");
    assert.deepEqual([...stdoutBytes(res)], [0xff]);
    assert.equal(text(stderrBytes(res)), "ok");
  });

  test("stream: output events in order, then the result", async () => {
    const events = [];
    for await (const ev of client.stream({
      language: "bash",
      code: "echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three; sleep 0.3; printf '\\377'",
    })) {
      events.push(ev);
    }
    const last = events.at(-1);
    assert.equal(last.type, "result");
    assert.equal(last.result.status, "completed");
    assert.ok(events.slice(0, -1).every((e) => e.type !== "result"));
    const seq = events.slice(0, -1).map((e) => `${e.type}:${text(eventBytes(e))}`).join("");
    assert.equal(seq, "stdout:one\nstderr:two\nstdout:three\n" + "stdout:\ufffd", JSON.stringify(events.slice(0, -1)));
    const out = events.filter((e) => e.type === "stdout");
    assert.deepEqual(out.map((e) => e.offset), [0, 4, 10]);
    assert.equal(out[2].encoding, "base64");
    assert.deepEqual([...eventBytes(out[2])], [0xff]);
    assert.equal(last.result.stdout_encoding, "base64");
    assert.equal(text(stdoutBytes(last.result)), "one\nthree\n\ufffd");
  });

  test("stream: a compile error streams compile output", async (t) => {
    const langs = (await client.languages()).map((l) => l.name);
    if (!langs.includes("c")) return t.skip("no C compiler on the server");
    const events = [];
    for await (const ev of client.stream({ language: "c", code: "int main( {" })) events.push(ev);
    assert.ok(events.some((e) => e.type === "compile"));
    assert.equal(events.at(-1).result.status, "error_compile");
  });

  test("stream: stopping early kills the run", async () => {
    const start = Date.now();
    for await (const ev of client.stream({ language: "bash", code: "echo up; sleep 30; echo never" })) {
      assert.equal(ev.type, "stdout");
      break;
    }
    assert.ok(Date.now() - start < 20000);
  });

  test("async: submit, job, wait", async () => {
    const st = await client.submit({ language: "python", code: "import time\ntime.sleep(0.5)\nprint('async done')" });
    assert.match(st.execution_id, /\S/);
    assert.ok(["queued", "running"].includes(st.status), st.status);
    assert.equal(typeof st.created_at, "string");
    const j = await client.job(st.execution_id);
    if (!j.done) assert.ok(["queued", "running"].includes(j.status.status));
    const res = await client.wait(st.execution_id);
    assert.equal(res.status, "completed");
    assert.equal(res.stdout, "async done\n");
    assert.equal(res.execution_id, st.execution_id);
    assert.equal(typeof res.finished_at, "string");
    const again = await client.job(st.execution_id, { wait: true, timeout: 5 });
    assert.ok(again.done);
    assert.equal(again.result.stdout, "async done\n");
    // wait=true with a short timeout answers with the status while it runs.
    const slow = await client.submit({ language: "bash", code: "sleep 3; echo late" });
    const held = await client.job(slow.execution_id, { wait: true, timeout: 0.2 });
    assert.equal(held.done, false);
    assert.equal((await client.wait(slow.execution_id, { pollSeconds: 1 })).stdout, "late\n");
    const missing = await client.job("exec_does_not_exist").catch((e) => e);
    assert.ok(missing instanceof SandboxRunError && missing.status === 404, String(missing));
  });

  test("files: upload, info, list, content, use, delete", async () => {
    const bytes = new Uint8Array([0, 1, 2, 0xff, 0x80]);
    const bin = await client.uploadFile("data.bin", bytes);
    assert.equal(bin.size, 5);
    assert.equal(bin.name, "data.bin");
    assert.match(bin.sha256, /^[0-9a-f]{64}$/);
    const script = await client.uploadFile("main.py", "import sys\nprint(open('data.bin','rb').read().hex(), sys.argv[1:])\n", { contentType: "text/x-python" });
    assert.equal(script.content_type, "text/x-python");
    const blob = await client.uploadFile("b.txt", new Blob(["from a blob"], { type: "text/plain" }), { ttlSeconds: 60 });
    assert.equal(blob.content_type, "text/plain");
    assert.equal((await client.file(bin.file_id)).sha256, bin.sha256);
    const ids = (await client.listFiles()).map((f) => f.file_id);
    for (const f of [bin, script, blob]) assert.ok(ids.includes(f.file_id));
    assert.deepEqual([...(await client.fileContent(bin.file_id))], [...bytes]);
    assert.equal(text(await client.fileContent(blob.file_id)), "from a blob");

    const res = await client.execute({
      language: "python",
      code: { file_id: script.file_id },
      files: { "data.bin": { file_id: bin.file_id } },
      args: ["x"],
    });
    assert.equal(res.stdout, "000102ff80 ['x']\n", res.stderr);

    for (const f of [bin, script, blob]) await client.deleteFile(f.file_id);
    const gone = await client.fileContent(bin.file_id).catch((e) => e);
    assert.ok(gone instanceof SandboxRunError && gone.status === 404, String(gone));
    const gone2 = await client.deleteFile(bin.file_id).catch((e) => e);
    assert.ok(gone2 instanceof SandboxRunError && gone2.status === 404, String(gone2));
  });

  test("sessions: a shared /work", async () => {
    const s = await client.createSession({ language: "bash", timeout_seconds: 10 });
    assert.match(s.session_id, /\S/);
    assert.equal(s.language, "bash");
    assert.equal(s.timeout_seconds, 10);
    try {
      assert.equal((await client.runCell(s.session_id, "echo kept > state.txt")).status, "completed");
      assert.equal((await client.runCell(s.session_id, "cat state.txt")).stdout, "kept\n");
      const info = await client.session(s.session_id);
      assert.ok(info.files.some((f) => f.path === "state.txt" && f.size === 5), JSON.stringify(info.files));
      assert.ok(info.bytes_used >= 5);
      assert.equal(text(await client.sessionFile(s.session_id, "state.txt")), "kept\n");
      assert.ok((await client.listSessions()).some((x) => x.session_id === s.session_id));
      await client.deleteSessionFile(s.session_id, "state.txt");
      assert.equal((await client.runCell(s.session_id, "test -e state.txt || echo gone")).stdout, "gone\n");
      // Runs in the session through execute() too.
      const res = await client.execute({ language: "bash", code: "pwd", session_id: s.session_id });
      assert.equal(res.stdout, "/work\n");
    } finally {
      await client.deleteSession(s.session_id);
    }
    const gone = await client.session(s.session_id).catch((e) => e);
    assert.ok(gone instanceof SandboxRunError && gone.status === 404, String(gone));
  });

  test("sessions: an interpreter's cells keep state and answer values", async () => {
    const s = await client.createSession({ language: "python", interpreter: true });
    assert.equal(s.interpreter, true);
    try {
      assert.equal((await client.runCell(s.session_id, "x = 41")).status, "completed");
      const v = await client.runCell(s.session_id, "print('side')\nx + 1");
      assert.equal(v.status, "completed");
      assert.equal(v.stdout, "side\n");
      assert.equal(v.result["text/plain"], "42");
      const ex = await client.runCell(s.session_id, "raise ValueError('no')");
      assert.equal(ex.status, "error_runtime");
      assert.equal(ex.exception.type, "ValueError");
      assert.equal(ex.exception.message, "no");
      // Another client looks the session's language up.
      const other = new Client({ baseUrl: url, apiKey });
      assert.equal((await other.runCell(s.session_id, "x")).result["text/plain"], "41");
    } finally {
      await client.deleteSession(s.session_id);
    }
  });

  test("call: an entry point's return value, or a CallError", async () => {
    const code = "def add(a, b):\n    return {'sum': a + b}\n\ndef boom():\n    raise KeyError('k')\n";
    const v = await client.call({ language: "python", code, entrypoint: { function: "add", params: { a: 1, b: 2 } } });
    assert.deepEqual(v, { sum: 3 });
    const err = await client.call({ language: "python", code, entrypoint: { function: "boom" } }).catch((e) => e);
    assert.ok(err instanceof CallError, String(err));
    assert.equal(err.exception.type, "KeyError");
    assert.equal(err.result.status, "error_runtime");
  });

  test("secrets: put, list, used by runs without being seen, delete", async () => {
    const api = await upstream();
    const name = "SDK_TOKEN_" + randomBytes(4).toString("hex").toUpperCase();
    const value = "sk-sdk-test-" + randomBytes(16).toString("hex");
    const allow = [`host.sandbox.internal:${port}`];
    try {
      const sec = await client.putSecret(name, {
        value,
        hosts: ["host.sandbox.internal"],
        header: { name: "Authorization", format: "Bearer {value}" },
      });
      assert.equal(sec.name, name);
      assert.deepEqual(sec.hosts, ["host.sandbox.internal"]);
      assert.deepEqual(sec.header, { name: "Authorization", format: "Bearer {value}" });
      assert.equal(typeof sec.created, "string");
      assert.ok(!JSON.stringify(sec).includes(value));
      const listed = await client.listSecrets();
      const mine = listed.find((x) => x.name === name);
      assert.ok(mine, JSON.stringify(listed));
      assert.deepEqual(mine.hosts, ["host.sandbox.internal"]);
      assert.ok(!JSON.stringify(listed).includes(value));

      // The program sees a placeholder; the API gets the value, in the
      // header and in place of the placeholder in the URL.
      const code = [
        "import os, sys, urllib.request",
        "token = os.environ[sys.argv[1]]",
        "print(token)",
        `print(urllib.request.urlopen('http://${allow[0]}/v1/me?key=' + token, timeout=30).read().decode())`,
      ].join("\n");
      const req = { language: "python", code, args: [name], secrets: [name], network: { allow } };
      const res = await client.execute(req);
      assert.equal(res.status, "completed", res.stderr);
      const [placeholder, answer] = res.stdout.split("\n");
      assert.ok(placeholder.startsWith(`SANDBOX_RUN_SECRET_${name}_`), placeholder);
      assert.equal(answer, "upstream ok");
      assert.ok(!JSON.stringify(res).includes(value));
      assert.deepEqual(api.got, [["Bearer " + value, "/v1/me?key=" + value]]);
      assert.equal(res.network.requests.length, 1, JSON.stringify(res.network));
      const r = res.network.requests[0];
      assert.deepEqual([r.scheme, r.method, r.path, r.status, r.secrets], ["http", "GET", "/v1/me?key=" + placeholder, 200, [name]]);
      assert.match(r.host, /host\.sandbox\.internal/);

      // The same streamed and queued.
      let streamed;
      for await (const ev of client.stream(req)) if (ev.type === "result") streamed = ev.result;
      assert.equal(streamed.stdout.split("\n")[1], "upstream ok", streamed.stderr);
      const job = await client.submit(req);
      const done = await client.wait(job.execution_id);
      assert.equal(done.stdout.split("\n")[1], "upstream ok", done.stderr);
      assert.deepEqual(done.network.requests[0].secrets, [name]);
      assert.equal(api.got.length, 3);
      assert.ok(api.got.every(([auth]) => auth === "Bearer " + value));

      // Refusals: a name the key has no secret by, a run without network, bad input.
      for (const bad of [{ ...req, secrets: ["NO_SUCH_SECRET"] }, { language: "python", code: "print(1)", secrets: [name] }]) {
        const err = await client.execute(bad).catch((e) => e);
        assert.ok(err instanceof SandboxRunError && err.status === 400, String(err));
      }
      const badPut = await client.putSecret(name + "_X", { value, hosts: [] }).catch((e) => e);
      assert.ok(badPut instanceof SandboxRunError && badPut.status === 400, String(badPut));
      assert.ok(!badPut.message.includes(value));

      // Deleted: no longer listed nor usable.
      await client.deleteSecret(name);
      assert.ok(!(await client.listSecrets()).some((x) => x.name === name));
      const after = await client.execute(req).catch((e) => e);
      assert.ok(after instanceof SandboxRunError && after.status === 400, String(after));
      const again = await client.deleteSecret(name).catch((e) => e);
      assert.ok(again instanceof SandboxRunError && again.status === 404, String(again));
    } finally {
      await client.deleteSecret(name).catch(() => {});
      await api.close();
    }
  });

  test("secrets: an interpreter session's cells see the placeholder, their requests each cell's value", async () => {
    const api = await upstream();
    const name = "SDK_TOKEN_" + randomBytes(4).toString("hex").toUpperCase();
    const value = "sk-sdk-test-" + randomBytes(16).toString("hex");
    const allow = [`host.sandbox.internal:${port}`];
    const put = (v) => client.putSecret(name, { value: v, hosts: ["host.sandbox.internal"], header: { name: "Authorization", format: "Bearer {value}" } });
    let s;
    try {
      await put(value);
      s = await client.createSession({ language: "python", interpreter: true, secrets: [name], network: { allow } });
      assert.deepEqual(s.secrets, [name]);
      const get = `urllib.request.urlopen('http://${allow[0]}/cell', timeout=30).read().decode()`;
      const first = await client.runCell(s.session_id, `import os, urllib.request\ntok = os.environ['${name}']\n${get}`);
      assert.equal(first.status, "completed", first.stderr);
      await put(value + "-rotated");
      const second = await client.runCell(s.session_id, `print(os.environ['${name}'] == tok)\n${get}`);
      assert.equal(second.status, "completed", second.stderr);
      assert.equal(second.stdout, "True\n");
      assert.deepEqual(api.got.map(([auth]) => auth), ["Bearer " + value, "Bearer " + value + "-rotated"]);
      const other = await client.runCell(s.session_id, "1", { secrets: ["OTHER_NAME"] }).catch((e) => e);
      assert.ok(other instanceof SandboxRunError && other.status === 400, String(other));
    } finally {
      if (s) await client.deleteSession(s.session_id);
      await client.deleteSecret(name).catch(() => {});
      await api.close();
    }
  });

  // Here rather than in sandbox.test.mjs: node --test runs the files at
  // once, and the stand-in API's port is one.
  test("live sandbox: secrets, its network changed while it runs", async () => {
    const api = await upstream();
    const name = "SDK_LIVE_TOKEN_" + randomBytes(4).toString("hex").toUpperCase();
    const value = "sk-sdk-test-" + randomBytes(16).toString("hex");
    const allow = [`host.sandbox.internal:${port}`];
    const options = { baseUrl: url, apiKey };
    const sandboxes = [];
    try {
      await client.putSecret(name, { value, hosts: ["host.sandbox.internal"], header: { name: "Authorization", format: "Bearer {value}" } });
      const sbx = await Sandbox.create(options, { languages: ["python"], timeout_seconds: 120, network: { allow }, secrets: [name] });
      sandboxes.push(sbx);
      assert.deepEqual(sbx.info.secrets, [name]);
      assert.deepEqual(sbx.info.network, allow);
      assert.deepEqual((await Sandbox.connect(options, sbx.id)).info.secrets, [name]);
      const code = [
        "import os, sys, urllib.request",
        "token = os.environ[sys.argv[1]]",
        "print(token)",
        "try:",
        `    print(urllib.request.urlopen('http://${allow[0]}/v1/me?key=' + token, timeout=10).read().decode())`,
        "except Exception as e:",
        "    print('failed', type(e).__name__)",
      ].join("\n");
      const fetch = ["python3", "-c", code, name];

      // The process sees a placeholder; the API gets the value.
      const res = await sbx.exec(fetch);
      const [placeholder, answer] = res.stdout.split("\n");
      assert.ok(placeholder.startsWith(`SANDBOX_RUN_SECRET_${name}_`), placeholder);
      assert.equal(answer, "upstream ok", res.stderr);
      assert.ok(!res.stdout.includes(value));
      assert.deepEqual(api.got, [["Bearer " + value, "/v1/me?key=" + value]]);

      // Nothing, while it runs: the request fails, the API gets none.
      await sbx.setNetwork([]);
      assert.deepEqual(sbx.info.network, []);
      assert.equal(sbx.info.state, "running");
      const now = await sbx.refresh();
      assert.ok(!now.network || now.network.length === 0, JSON.stringify(now));
      assert.deepEqual(now.secrets, [name]);
      assert.match((await sbx.exec(fetch)).stdout.split("\n")[1], /^failed /);
      assert.equal(api.got.length, 1);
      // Back again.
      await sbx.setNetwork(allow);
      assert.deepEqual(sbx.info.network, allow);
      assert.equal((await sbx.exec(fetch)).stdout.split("\n")[1], "upstream ok");
      assert.deepEqual(api.got.map(([auth]) => auth), ["Bearer " + value, "Bearer " + value]);

      // Byte budgets: 64 KiB fits 100 KiB once, not twice; raised, what
      // it moved is kept; setNetwork without budgets drops them.
      const big = ["python3", "-c", [
        "import urllib.request",
        "try:",
        `    print(len(urllib.request.urlopen('http://${allow[0]}/big', timeout=10).read()))`,
        "except Exception as e:",
        "    print('failed', type(e).__name__)",
      ].join("\n")];
      const bigOut = async () => (await sbx.exec(big)).stdout;
      await sbx.setNetwork(allow, { budgets: { [allow[0]]: 100 * 1024 } });
      assert.deepEqual([sbx.info.network, sbx.info.network_budgets], [allow, { [allow[0]]: 100 * 1024 }]);
      assert.equal(await bigOut(), "65536\n");
      assert.match(await bigOut(), /^failed /);
      await sbx.setNetwork(allow, { budgets: { [allow[0]]: 256 * 1024 } });
      assert.deepEqual((await sbx.refresh()).network_budgets, { [allow[0]]: 256 * 1024 });
      assert.deepEqual([await bigOut(), await bigOut()], ["65536\n", "65536\n"]);
      assert.match(await bigOut(), /^failed /);
      await sbx.setNetwork(allow);
      assert.deepEqual(sbx.info.network_budgets, {});
      assert.equal(await bigOut(), "65536\n");
      const budgeted = await Sandbox.create(options, { languages: ["bash"], timeout_seconds: 60, network: { allow, budgets: { [allow[0]]: 1000 } } });
      sandboxes.push(budgeted);
      assert.deepEqual(budgeted.info.network_budgets, { [allow[0]]: 1000 });

      // Refusals: beyond the server's network.allow; a sandbox made
      // without a network; secrets without a network, or unknown; a
      // budget for an entry not allowed, or of no bytes.
      const is400 = (e) => e instanceof SandboxRunError && e.status === 400;
      const isBudget400 = (e) => is400(e) && /budgets/.test(e.message);
      for (const bad of [{ "example.com": 10 }, { [allow[0]]: 0 }]) {
        await assert.rejects(sbx.setNetwork(allow, { budgets: bad }), isBudget400);
        await assert.rejects(Sandbox.create(options, { languages: ["bash"], network: { allow, budgets: bad } }), isBudget400);
      }
      await assert.rejects(sbx.setNetwork(["10.0.0.0/8"]), is400);
      const plain = await Sandbox.create(options, { languages: ["bash"], timeout_seconds: 60 });
      sandboxes.push(plain);
      await assert.rejects(plain.setNetwork(allow), is400);
      await assert.rejects(Sandbox.create(options, { languages: ["bash"], secrets: [name] }), is400);
      await assert.rejects(Sandbox.create(options, { languages: ["bash"], secrets: ["NO_SUCH_SECRET"], network: { allow } }), is400);
    } finally {
      for (const s of sandboxes) await s.kill().catch(() => {});
      await client.deleteSecret(name).catch(() => {});
      await api.close();
    }
  });

  test("errors: without the key", { skip: apiKey ? false : "the server has no keys" }, async () => {
    const anon = new Client({ baseUrl: url });
    assert.equal((await anon.health()).status, "ok");
    const err = await anon.languages().catch((e) => e);
    assert.ok(err instanceof SandboxRunError && err.status === 401, String(err));
    if (hasWebSocket) {
      const wsErr = await anon.interactive({ language: "bash", code: "true" }).catch((e) => e);
      assert.ok(wsErr instanceof SandboxRunError && wsErr.status === 401, String(wsErr));
    }
  });

  test("interactive: without a WebSocket, a clear error", async () => {
    const saved = globalThis.WebSocket;
    delete globalThis.WebSocket;
    try {
      await assert.rejects(client.interactive({ language: "bash", code: "cat" }), /needs a WebSocket/);
      if (saved) {
        // A constructor given as an option (e.g. the ws package's).
        const s = await client.interactive({ language: "bash", code: "cat", input_data: "via option\n" }, { WebSocket: saved });
        s.closeStdin();
        assert.equal((await s.result).stdout, "via option\n");
      }
    } finally {
      if (saved) globalThis.WebSocket = saved;
    }
  });

  test("an aborted call rejects, and the server kills the run", async () => {
    const start = Date.now();
    await assert.rejects(
      client.execute({ language: "bash", code: "sleep 30" }, { signal: AbortSignal.timeout(300) }),
      (e) => e.name === "TimeoutError" || e.name === "AbortError",
    );
    assert.ok(Date.now() - start < 10000);
  });

  describe("interactive", { skip: hasWebSocket ? false : "no global WebSocket (Node 20: node --experimental-websocket)" }, () => {
    test("a dialogue: stdin written as the program asks", async () => {
      const s = await client.interactive({
        language: "python",
        code: "import sys\nname = input('name? ')\nprint(f'hello {name}', flush=True)\nprint(sys.stdin.read().upper(), end='')",
      });
      let out = "";
      let step = 0;
      for await (const ev of s.events) {
        assert.equal(ev.type, "stdout");
        out += text(eventBytes(ev));
        if (step === 0 && out.includes("name? ")) {
          step = 1;
          await s.write("Ada\n");
        } else if (step === 1 && out.includes("hello Ada\n")) {
          step = 2;
          await s.write(new TextEncoder().encode("rest "));
          await s.write("of it");
          s.closeStdin();
        }
      }
      const res = await s.result;
      assert.equal(res.status, "completed", res.stderr);
      assert.equal(out, "name? hello Ada\nREST OF IT");
      assert.equal(res.stdout, out);
      assert.ok(s.done);
      assert.throws(() => s.closeStdin(), /over/);
    });

    test("kill ends the run", async () => {
      const s = await client.interactive({ language: "bash", code: "echo up; sleep 60" });
      for await (const ev of s.events) {
        assert.equal(text(eventBytes(ev)), "up\n");
        s.kill();
      }
      const res = await s.result;
      assert.equal(res.limit_reason, "canceled");
    });

    test("a refused request rejects result", async () => {
      const s = await client.interactive({ language: "no-such-language", code: "x" });
      const err = await s.result.catch((e) => e);
      assert.ok(err instanceof SandboxRunError && err.status === 400, String(err));
    });
  });

  describe("README examples, verbatim", () => {
    const tmp = [];
    after(async () => {
      for (const f of tmp) await unlink(f).catch(() => {});
    });

    // The ```js blocks of README.md that follow <!-- example: NAME -->,
    // run as they are (the package resolves itself by name), but for the
    // port of the secrets' stand-in API, 8000: SANDBOX_RUN_TEST_PORT's.
    async function example(name) {
      const readme = await readFile(path.join(pkgDir, "README.md"), "utf8");
      const m = readme.match(new RegExp(`<!-- example: ${name} -->\\s*\`\`\`js\\n([\\s\\S]*?)\`\`\``));
      assert.ok(m, `README.md has no example ${name}`);
      const file = path.join(pkgDir, "test", `.readme-${name}-${process.pid}.mjs`);
      tmp.push(file);
      await writeFile(file, m[1].replace(/\b8000\b/g, String(port)));
      return new Promise((resolve, reject) => {
        execFile(process.execPath, [...process.execArgv.filter((a) => a.startsWith("--experimental")), file], { env: process.env, timeout: 60000 }, (err, stdout, stderr) => {
          if (err) reject(new Error(`${name}: ${err.message}\n${stdout}\n${stderr}`));
          else resolve(stdout);
        });
      });
    }

    test("quick start", async () => {
      assert.equal(await example("quickstart"), "completed 42\n");
    });

    test("tour", async () => {
      assert.equal(
        await example("tour"),
        ["stdout: tick 1", "stdout: tick 2", "exit 0", "file: 3 bytes", "42", "queued: 4", "refused: 400"].join("\n") + "\n",
      );
    });

    test("interactive", { skip: hasWebSocket ? false : "no global WebSocket" }, async () => {
      assert.equal(await example("interactive"), "hi there\ncompleted\n");
    });

    test("secrets", async () => {
      assert.equal(
        await example("secrets"),
        [
          "API_TOKEN [ 'host.sandbox.internal' ]",
          "the API got: Bearer sk-live-1234 /v1/me",
          "the program sees: SANDBOX_RUN_SECRET_API_TOKEN_...",
          "ok",
          "[ [ 'GET', '/v1/me', 200, [ 'API_TOKEN' ] ] ]",
        ].join("\n") + "\n",
      );
    });

    test("live sandbox secrets", async () => {
      assert.equal(
        await example("live-secrets"),
        ["[ 'API_TOKEN' ]", "the API got: Bearer sk-live-1234 /v1/live", "ok", "[] 1"].join("\n") + "\n",
      );
    });
  });
});
