// Live sandboxes (Sandbox) against a real server: SANDBOX_RUN_URL (and
// SANDBOX_RUN_API_KEY when the server has keys). Without SANDBOX_RUN_URL
// every test is skipped. Build first: npx tsc -p . (these import dist/).
//
//   SANDBOX_RUN_URL=http://127.0.0.1:8080 node --test test/

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { Sandbox, SandboxRunError } from "../dist/index.js";

const url = process.env.SANDBOX_RUN_URL;
const apiKey = process.env.SANDBOX_RUN_API_KEY || undefined;
const skip = url ? false : "SANDBOX_RUN_URL is not set (the URL of a running sandbox-run serve)";
const options = { baseUrl: url ?? "", apiKey };
const is404 = (e) => e instanceof SandboxRunError && e.status === 404;

describe("Sandbox", { skip }, () => {
  let sbx;
  before(async () => {
    sbx = await Sandbox.create(options, { languages: ["bash", "python"], env: { GREETING: "hi" }, timeout_seconds: 300, metadata: { test: "ts" } });
  });
  after(async () => {
    await sbx?.kill().catch(() => {});
  });

  test("create, connect, list, setTimeout, pause, resume, kill", async () => {
    assert.match(sbx.id, /\S/);
    assert.match(sbx.info.access_token, /\S/);
    assert.deepEqual(sbx.info.languages, ["bash", "python"]);
    assert.deepEqual(sbx.info.metadata, { test: "ts" });
    assert.equal(sbx.info.state, "running");
    const left = (Date.parse(sbx.info.end_at) - Date.now()) / 1000;
    assert.ok(left > 200 && left <= 301, String(left));

    const again = await Sandbox.connect(options, sbx.id);
    assert.equal(again.id, sbx.id);
    assert.equal(again.info.access_token, undefined);
    assert.ok((await Sandbox.list(options)).some((s) => s.id === sbx.id));
    await sbx.setTimeout(600);
    const moved = (Date.parse(sbx.info.end_at) - Date.now()) / 1000;
    assert.ok(moved > 500 && moved <= 601, String(moved));
    assert.equal((await sbx.refresh()).end_at, sbx.info.end_at);
    assert.match(sbx.info.access_token, /\S/); // kept

    await sbx.pause();
    assert.equal(sbx.info.state, "paused");
    assert.equal((await sbx.refresh()).state, "paused");
    await assert.rejects(sbx.pause(), (e) => e instanceof SandboxRunError && e.status === 409);
    await sbx.resume(300);
    assert.equal(sbx.info.state, "running");
    const resumed = (Date.parse(sbx.info.end_at) - Date.now()) / 1000;
    assert.ok(resumed > 200 && resumed <= 301, String(resumed));
    await sbx.pause();
    assert.equal((await sbx.exec("echo awake")).stdout, "awake\n"); // a call resumes it
    assert.equal((await sbx.refresh()).state, "running");

    await sbx.exec("echo kept > kept.txt");
    await sbx.pause({ evict: true });
    assert.equal(sbx.info.evicted, true);
    assert.equal(sbx.info.state, "paused");
    assert.equal((await sbx.exec("cat kept.txt")).stdout, "kept\n"); // a call brings it back
    assert.ok(!(await sbx.refresh()).evicted);
    const snap = await sbx.snapshot("ts-snap");
    assert.ok(snap.names.includes("ts-snap"));
    const fromSnap = await Sandbox.create(options, { snapshot: snap.id, timeout_seconds: 60 });
    assert.equal((await fromSnap.exec("cat kept.txt")).stdout, "kept\n");
    await fromSnap.kill();
    assert.deepEqual((await Sandbox.listSnapshots(options, sbx.id)).map((s) => s.id), [snap.id]);
    await Sandbox.deleteSnapshot(options, snap.id);
    assert.deepEqual(await Sandbox.listSnapshots(options, sbx.id), []);
    await assert.rejects(Sandbox.deleteSnapshot(options, snap.id), is404);
    const [kid] = await sbx.fork(1, 60);
    assert.equal((await kid.exec("cat kept.txt")).stdout, "kept\n");
    await kid.kill();

    const other = await Sandbox.create(options, { timeout_seconds: 60 });
    assert.equal((await other.exec("echo $((6*7))")).stdout, "42\n");
    await other.kill();
    await assert.rejects(other.exec("true"), is404);
    await assert.rejects(Sandbox.connect(options, "sbx-no-such"), is404);
    await assert.rejects(Sandbox.create(options, { languages: ["cobol-74"] }), (e) => e instanceof SandboxRunError && e.status === 400);
  });

  test("exec: exit code, output, env, cwd, argv, stdin, timeout, signals", async () => {
    let res = await sbx.exec('echo "$GREETING $K from $(pwd)"; echo err >&2; exit 3', { env: { K: "v" } });
    assert.equal(res.exit_code, 3);
    assert.equal(res.status, "exit status 3");
    assert.equal(res.stdout, "hi v from /work\n");
    assert.equal(res.stderr, "err\n");
    assert.ok(res.pid > 0);
    res = await sbx.exec(["python3", "-c", "import os, sys; print(os.getcwd(), sys.stdin.read().upper())"], { cwd: "/tmp", stdin: "abc" });
    assert.equal(res.exit_code, 0);
    assert.equal(res.stdout, "/tmp ABC\n");
    res = await sbx.exec("sleep 30", { timeout: 0.5 });
    assert.equal(res.timed_out, true);
    res = await sbx.exec("kill -9 $$");
    assert.equal(res.exit_code, -1);
    assert.equal(res.status, "signal: killed");
    await assert.rejects(sbx.exec(["/no/such/program"]), (e) => e instanceof SandboxRunError && e.status === 400);
  });

  test("exec: output streamed as it comes, in order", async () => {
    const events = [];
    const start = Date.now();
    const res = await sbx.exec("echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three", {
      onStdout: (s) => events.push(["out", s, Date.now() - start]),
      onStderr: (s) => events.push(["err", s, Date.now() - start]),
    });
    assert.deepEqual(events.map(([k, s]) => [k, s]), [["out", "one\n"], ["err", "two\n"], ["out", "three\n"]]);
    assert.ok(events[0][2] < events[2][2] - 400, JSON.stringify(events));
    assert.equal(res.stdout, "one\nthree\n");
    assert.equal(res.stderr, "two\n");
    const tty = await sbx.exec("tty >/dev/null && stty size", { pty: { cols: 90, rows: 20 } });
    assert.equal(tty.exit_code, 0);
    assert.match(tty.stdout, /20 90/);
  });

  test("background processes: stdin, follow, signal", async () => {
    const pid = await sbx.start("while read l; do echo got $l; done; echo bye", { stdin: true, tag: "reader" });
    assert.ok((await sbx.processes()).some((p) => p.pid === pid && p.tag === "reader"));
    const out = [];
    const followed = sbx.follow(pid, { onStdout: (s) => out.push(s) });
    await new Promise((r) => setTimeout(r, 500));
    await sbx.sendStdin(pid, "a\n");
    await sbx.sendStdin(pid, new TextEncoder().encode("b\n"), { close: true });
    const res = await followed;
    assert.equal(res.pid, pid);
    assert.equal(res.exit_code, 0);
    assert.equal(res.stdout, "got a\ngot b\nbye\n");
    assert.equal(out.join(""), res.stdout);

    const sleeper = await sbx.start(["sleep", "60"]);
    const ended = sbx.follow(sleeper);
    await new Promise((r) => setTimeout(r, 200));
    await sbx.signal(sleeper, "KILL");
    assert.equal((await ended).status, "signal: killed");
  });

  test("files: write, read (bytes exact), stat, list, mkdir, move, remove", async () => {
    const f = sbx.files;
    const data = new Uint8Array(1 << 20).map((_, i) => (i * 7 + (i >> 9)) & 0xff);
    const e = await f.write("dir/blob.bin", data);
    assert.equal(e.path, "/work/dir/blob.bin");
    assert.equal(e.size, data.length);
    assert.equal(e.type, "file");
    assert.deepEqual(await f.read("/work/dir/blob.bin"), data);
    assert.equal((await f.write("t.txt", "héllo\n")).size, 7);
    assert.equal(await f.readText("t.txt"), "héllo\n");
    assert.equal((await f.write("b.bin", new Blob([new Uint8Array([0, 1, 2])]))).size, 3);
    assert.equal((await f.stat("dir")).type, "dir");
    assert.equal((await f.mkdir("a/b")).path, "/work/a/b");
    assert.equal((await f.move("dir/blob.bin", "a/b/moved.bin")).path, "/work/a/b/moved.bin");
    assert.deepEqual((await f.list("a", 2)).map((x) => x.path).sort(), ["/work/a/b", "/work/a/b/moved.bin"]);
    assert.ok((await f.list()).some((x) => x.name === "t.txt"));
    assert.equal(await f.exists("a/b/moved.bin"), true);
    await f.remove("a");
    assert.equal(await f.exists("a"), false);
    await assert.rejects(f.read("missing.txt"), is404);
    assert.equal((await sbx.exec("cat t.txt; echo made > m.txt")).stdout, "héllo\n");
    assert.equal(await f.readText("m.txt"), "made\n");
  });
});
