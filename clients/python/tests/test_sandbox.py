"""Live sandboxes (Sandbox) against a real sandbox-run server.

Skipped unless SANDBOX_RUN_URL names one (SANDBOX_RUN_API_KEY too, if it
has keys):

    SANDBOX_RUN_URL=http://127.0.0.1:8080 python3 -m unittest discover -s clients/python/tests -p 'test_sandbox*.py' -v
"""

import datetime
import http.server
import io
import os
import secrets
import threading
import time
import unittest

from sandbox_run import Client, FileEntry, ProcessInfo, ProcessResult, Sandbox, SandboxRunError

URL = os.environ.get("SANDBOX_RUN_URL", "")
KEY = os.environ.get("SANDBOX_RUN_API_KEY") or None
# The port of this machine the secrets' stand-in API listens on: the
# server (on this machine too) must allow host.sandbox.internal on it.
PORT = int(os.environ.get("SANDBOX_RUN_TEST_PORT") or 8000)


def client():
    return Client(URL, api_key=KEY, timeout=120)


class DecodeTest(unittest.TestCase):
    """What needs no server: reading the API's objects."""

    def test_sandbox(self):
        sbx = Sandbox.from_json(
            {
                "id": "sbx1",
                "languages": ["python", 3],
                "metadata": {"k": "v"},
                "memory_mb": 512,
                "started_at": "2026-01-02T03:04:05.123456789Z",
                "end_at": "2026-01-02T03:09:05Z",
                "state": "running",
                "access_token": "tok",
                "network": ["api.example.com:443"],
                "network_budgets": {"api.example.com:443": 200000000, "bad": "x"},
                "secrets": ["API_TOKEN", 7],
                "future_field": 1,
            }
        )
        self.assertEqual(sbx.network, ["api.example.com:443"])
        self.assertEqual(sbx.network_budgets, {"api.example.com:443": 200000000})
        self.assertEqual(Sandbox.from_json({"id": "x"}).network_budgets, {})
        self.assertEqual(sbx.secrets, ["API_TOKEN"])
        self.assertEqual((Sandbox.from_json({"id": "x"}).network, Sandbox.from_json({"id": "x"}).secrets), ([], []))
        self.assertEqual(sbx.id, "sbx1")
        self.assertEqual(sbx.languages, ["python"])
        self.assertEqual(sbx.metadata, {"k": "v"})
        self.assertEqual(sbx.memory_mb, 512)
        self.assertEqual(sbx.end_at - sbx.started_at, datetime.timedelta(seconds=299, microseconds=876544))
        self.assertEqual(sbx.access_token, "tok")
        self.assertEqual(sbx.raw["future_field"], 1)
        with self.assertRaises(RuntimeError):
            sbx.kill()  # not made by a client

    def test_budgets_need_allow(self):
        # Refused before any request: the client's server does not exist.
        with self.assertRaisesRegex(ValueError, "network_allow"):
            Sandbox.create(Client("http://127.0.0.1:9"), network_budgets={"pypi.org:443": 1000})

    def test_process_and_files(self):
        res = ProcessResult.from_json({"pid": 7, "exit_code": -1, "status": "signal: killed", "timed_out": True})
        self.assertEqual((res.pid, res.exit_code, res.status, res.timed_out, res.ok), (7, -1, "signal: killed", True, False))
        self.assertIsNone(ProcessResult.from_json({"pid": 1, "error": "the sandbox ended"}).exit_code)
        info = ProcessInfo.from_json({"pid": 3, "args": ["sleep", "9"], "cwd": "/work", "pty": True})
        self.assertEqual((info.pid, info.args, info.cwd, info.pty, info.tag), (3, ["sleep", "9"], "/work", True, ""))
        e = FileEntry.from_json({"name": "a", "path": "/work/a", "type": "file", "size": 3, "mode": "-rw-r--r--", "mod_time": "2026-01-02T03:04:05Z"})
        self.assertEqual((e.path, e.size, e.mode, e.mod_time.year), ("/work/a", 3, "-rw-r--r--", 2026))


@unittest.skipUnless(URL, "SANDBOX_RUN_URL is not set: no server to test against")
class SandboxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client()
        cls.sbx = Sandbox.create(cls.c, ["bash", "python"], env={"GREETING": "hi"}, timeout=300, metadata={"test": "py"})

    @classmethod
    def tearDownClass(cls):
        try:
            cls.sbx.kill()
        except SandboxRunError:
            pass

    def test_lifecycle(self):
        sbx = self.sbx
        self.assertTrue(sbx.id)
        self.assertTrue(sbx.access_token)
        self.assertEqual(sbx.languages, ["bash", "python"])
        self.assertEqual(sbx.metadata, {"test": "py"})
        self.assertEqual(sbx.state, "running")
        left = (sbx.end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        self.assertTrue(200 < left <= 301, left)
        got = Sandbox.get(self.c, sbx.id)
        self.assertEqual(got.id, sbx.id)
        self.assertEqual(got.access_token, "")  # only the creator's answer has it
        self.assertIn(sbx.id, [s.id for s in Sandbox.list(self.c)])
        sbx.set_timeout(600)
        left = (sbx.end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        self.assertTrue(500 < left <= 601, left)
        self.assertEqual(sbx.refresh().end_at, sbx.end_at)

        sbx.pause()
        self.assertEqual(sbx.state, "paused")
        self.assertEqual(sbx.refresh().state, "paused")
        with self.assertRaises(SandboxRunError) as cm:
            sbx.pause()
        self.assertEqual(cm.exception.status, 409)
        sbx.resume(timeout=300)
        self.assertEqual(sbx.state, "running")
        left = (sbx.end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        self.assertTrue(200 < left <= 301, left)
        sbx.pause()
        self.assertEqual(sbx.exec("echo awake").stdout, "awake\n")  # a call resumes it
        self.assertEqual(sbx.refresh().state, "running")

        sbx.exec("echo kept > kept.txt")
        sbx.pause(evict=True)
        self.assertTrue(sbx.evicted)
        self.assertEqual(sbx.state, "paused")
        self.assertEqual(sbx.exec("cat kept.txt").stdout, "kept\n")  # a call brings it back
        self.assertFalse(sbx.refresh().evicted)
        snap = sbx.snapshot("py-snap")
        self.assertIn("py-snap", snap["names"])
        with Sandbox.create(self.c, snapshot=snap["id"], timeout=60) as fromsnap:
            self.assertEqual(fromsnap.exec("cat kept.txt").stdout, "kept\n")
        self.assertEqual([s["id"] for s in Sandbox.list_snapshots(self.c, sbx.id)], [snap["id"]])
        Sandbox.delete_snapshot(self.c, snap["id"])
        self.assertEqual(Sandbox.list_snapshots(self.c, sbx.id), [])
        with self.assertRaises(SandboxRunError) as cm:
            Sandbox.delete_snapshot(self.c, snap["id"])
        self.assertEqual(cm.exception.status, 404)
        kids = sbx.fork(1, timeout=60)
        self.assertEqual(len(kids), 1)
        with kids[0] as kid:
            self.assertEqual(kid.exec("cat kept.txt").stdout, "kept\n")

        with Sandbox.create(self.c, timeout=60) as other:
            self.assertEqual(other.exec("echo $((6*7))").stdout, "42\n")
        with self.assertRaises(SandboxRunError) as cm:
            other.exec("true")
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(SandboxRunError) as cm:
            Sandbox.get(self.c, "sbx-no-such")
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(SandboxRunError) as cm:
            Sandbox.create(self.c, ["cobol-74"])
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(SandboxRunError) as cm:
            Sandbox.create(self.c, network_allow=["10.0.0.0/8"])  # beyond the server's network.allow
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("network", str(cm.exception))

    def test_exec(self):
        res = self.sbx.exec('echo "$GREETING $K from $(pwd)"; echo err >&2; exit 3', env={"K": "v"})
        self.assertIsInstance(res, ProcessResult)
        self.assertEqual(res.exit_code, 3)
        self.assertEqual(res.status, "exit status 3")
        self.assertEqual(res.stdout, "hi v from /work\n")
        self.assertEqual(res.stderr, "err\n")
        self.assertFalse(res.ok)
        self.assertGreater(res.pid, 0)
        # An argv (no shell), in cwd; stdin.
        res = self.sbx.exec(["python3", "-c", "import os, sys; print(os.getcwd(), sys.stdin.read().upper())"], cwd="/tmp", stdin="abc")
        self.assertEqual((res.exit_code, res.stdout), (0, "/tmp ABC\n"))
        self.assertTrue(res.ok)
        res = self.sbx.exec("sleep 30", timeout=0.5)
        self.assertTrue(res.timed_out)
        res = self.sbx.exec("kill -9 $$")
        self.assertEqual((res.exit_code, res.status), (-1, "signal: killed"))
        with self.assertRaises(SandboxRunError) as cm:
            self.sbx.exec(["/no/such/program"])
        self.assertEqual(cm.exception.status, 400)

    def test_exec_streaming(self):
        events = []
        start = time.monotonic()
        res = self.sbx.exec(
            "echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three",
            on_stdout=lambda s: events.append(("out", s, time.monotonic() - start)),
            on_stderr=lambda s: events.append(("err", s, time.monotonic() - start)),
        )
        self.assertEqual([(k, s) for k, s, _ in events], [("out", "one\n"), ("err", "two\n"), ("out", "three\n")])
        self.assertLess(events[0][2], events[2][2] - 0.4)  # each as it came
        self.assertEqual((res.stdout, res.stderr, res.exit_code), ("one\nthree\n", "two\n", 0))
        # On a terminal: its output is stdout's.
        res = self.sbx.exec("tty >/dev/null && stty size", pty=(90, 20))
        self.assertEqual(res.exit_code, 0)
        self.assertIn("20 90", res.stdout)

    def test_background(self):
        pid = self.sbx.start("while read l; do echo got $l; done; echo bye", stdin=True, tag="reader")
        self.assertGreater(pid, 0)
        procs = self.sbx.processes()
        self.assertTrue(any(p.pid == pid and p.tag == "reader" for p in procs), procs)
        out = []
        done = {}
        t = threading.Thread(target=lambda: done.setdefault("res", self.sbx.follow(pid, on_stdout=out.append)))
        t.start()
        time.sleep(0.5)
        self.sbx.send_stdin(pid, "a\n")
        self.sbx.send_stdin(pid, b"b\n", close=True)
        t.join(30)
        res = done["res"]
        self.assertEqual((res.pid, res.exit_code, res.stdout), (pid, 0, "got a\ngot b\nbye\n"))
        self.assertEqual("".join(out), "got a\ngot b\nbye\n")

        pid = self.sbx.start(["sleep", "60"])
        self.sbx.signal(pid, "SIGKILL")
        deadline = time.monotonic() + 10
        while any(p.pid == pid for p in self.sbx.processes()) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(any(p.pid == pid for p in self.sbx.processes()))

    def test_files(self):
        f = self.sbx.files
        data = bytes(range(256)) * 4097
        e = f.write("dir/blob.bin", data)
        self.assertIsInstance(e, FileEntry)
        self.assertEqual((e.path, e.size, e.type), ("/work/dir/blob.bin", len(data), "file"))
        self.assertEqual(f.read("/work/dir/blob.bin"), data)
        self.assertEqual(f.write("t.txt", "héllo\n").size, 7)
        self.assertEqual(f.read_text("t.txt"), "héllo\n")
        self.assertEqual(f.write("s.bin", io.BytesIO(b"\x00streamed")).size, 9)
        self.assertEqual(f.read("s.bin"), b"\x00streamed")
        self.assertEqual(f.stat("dir").type, "dir")
        self.assertEqual(f.mkdir("a/b").path, "/work/a/b")
        self.assertEqual(f.move("dir/blob.bin", "a/b/moved.bin").path, "/work/a/b/moved.bin")
        self.assertEqual(sorted(e.path for e in f.list("a", depth=2)), ["/work/a/b", "/work/a/b/moved.bin"])
        self.assertIn("t.txt", [e.name for e in f.list()])
        self.assertTrue(f.exists("a/b/moved.bin"))
        f.remove("a")
        self.assertFalse(f.exists("a"))
        with self.assertRaises(SandboxRunError) as cm:
            f.read("missing.txt")
        self.assertEqual(cm.exception.status, 404)
        # What a process wrote is a file; a file written is a process's.
        self.assertEqual(self.sbx.exec("cat t.txt; echo made > m.txt").stdout, "héllo\n")
        self.assertEqual(f.read("m.txt"), b"made\n")


class _Upstream(http.server.BaseHTTPRequestHandler):
    """A stand-in for the API a secret is for: keeps what each request
    carried (its Authorization header and target) and answers "upstream ok"."""

    got = []

    def do_GET(self):
        type(self).got.append((self.headers.get("Authorization"), self.path))
        body = b"x" * 65536 if self.path == "/big" else b"upstream ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@unittest.skipUnless(URL, "SANDBOX_RUN_URL is not set: no server to test against")
class SandboxSecretsTest(unittest.TestCase):
    """A live sandbox with a secret, and its network changed while it runs,
    against a stand-in API on this machine's PORT, which its processes reach
    as host.sandbox.internal:PORT (SANDBOX_RUN_TEST_PORT; the server's
    network.allow must list it)."""

    def setUp(self):
        self.c = client()
        _Upstream.got = []
        self.api = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), _Upstream)
        threading.Thread(target=self.api.serve_forever, daemon=True).start()
        self.addCleanup(self.api.server_close)
        self.addCleanup(self.api.shutdown)
        self.allow = ["host.sandbox.internal:%d" % PORT]
        self.name = "SDK_LIVE_TOKEN_" + secrets.token_hex(4).upper()
        self.value = "sk-sdk-test-" + secrets.token_hex(16)

    def tearDown(self):
        try:
            self.c.delete_secret(self.name)
        except SandboxRunError:
            pass

    def test_live_secrets(self):
        self.c.put_secret(self.name, self.value, hosts=["host.sandbox.internal"], header=("Authorization", "Bearer {value}"))
        code = (
            "import os, sys, urllib.request\n"
            "token = os.environ[sys.argv[1]]\n"
            "print(token)\n"
            "try:\n"
            "    print(urllib.request.urlopen('http://%s/v1/me?key=' + token, timeout=10).read().decode())\n"
            "except Exception as e:\n"
            "    print('failed', type(e).__name__)\n" % self.allow[0]
        )
        fetch = ["python3", "-c", code, self.name]
        with Sandbox.create(self.c, ["python"], timeout=120, network_allow=self.allow, secrets=[self.name]) as sbx:
            self.assertEqual((sbx.secrets, sbx.network), ([self.name], self.allow))
            self.assertEqual(Sandbox.get(self.c, sbx.id).secrets, [self.name])
            # The process sees a placeholder; the API gets the value.
            res = sbx.exec(fetch)
            placeholder, answer = res.stdout.splitlines()
            self.assertTrue(placeholder.startswith("SANDBOX_RUN_SECRET_%s_" % self.name), placeholder)
            self.assertEqual(answer, "upstream ok")
            self.assertNotIn(self.value, res.stdout)
            self.assertEqual(_Upstream.got, [("Bearer " + self.value, "/v1/me?key=" + self.value)])

            # Nothing, while it runs: the request fails, the API gets none.
            sbx.set_network([])
            self.assertEqual(sbx.network, [])
            self.assertEqual(sbx.state, "running")
            self.assertEqual(sbx.refresh().network, [])
            self.assertEqual(sbx.refresh().secrets, [self.name])
            self.assertTrue(sbx.exec(fetch).stdout.splitlines()[1].startswith("failed "))
            self.assertEqual(len(_Upstream.got), 1)
            # Back again.
            sbx.set_network(self.allow)
            self.assertEqual(sbx.network, self.allow)
            self.assertEqual(sbx.exec(fetch).stdout.splitlines()[1], "upstream ok")
            self.assertEqual([a for a, _ in _Upstream.got], ["Bearer " + self.value] * 2)

            # Beyond the server's network.allow.
            with self.assertRaises(SandboxRunError) as cm:
                sbx.set_network(["10.0.0.0/8"])
            self.assertEqual(cm.exception.status, 400)

        # A sandbox made without a network cannot be given one; secrets
        # need a network, and a secret the key has.
        with Sandbox.create(self.c, ["bash"], timeout=60) as plain:
            with self.assertRaises(SandboxRunError) as cm:
                plain.set_network(self.allow)
            self.assertEqual(cm.exception.status, 400)
        for kw in ({"secrets": [self.name]}, {"secrets": ["NO_SUCH_SECRET"], "network_allow": self.allow}):
            with self.assertRaises(SandboxRunError) as cm:
                Sandbox.create(self.c, ["bash"], timeout=60, **kw)
            self.assertEqual(cm.exception.status, 400, kw)

    def test_live_budgets(self):
        # A 64 KiB answer fits a budget of 100 KiB once, not twice;
        # set_network raises it (what was moved kept) or drops it.
        fetch = [
            "python3",
            "-c",
            "import urllib.request\n"
            "try:\n"
            "    print(len(urllib.request.urlopen('http://%s/big', timeout=10).read()))\n"
            "except Exception as e:\n"
            "    print('failed', type(e).__name__)\n" % self.allow[0],
        ]
        entry = self.allow[0]
        with Sandbox.create(self.c, ["python"], timeout=120, network_allow=self.allow, network_budgets={entry: 100 * 1024}) as sbx:
            self.assertEqual(sbx.network_budgets, {entry: 100 * 1024})
            self.assertEqual(sbx.exec(fetch).stdout, "65536\n")
            self.assertTrue(sbx.exec(fetch).stdout.startswith("failed "))
            sbx.set_network(self.allow, budgets={entry: 256 * 1024})
            self.assertEqual((sbx.network, sbx.network_budgets), (self.allow, {entry: 256 * 1024}))
            self.assertEqual(sbx.refresh().network_budgets, {entry: 256 * 1024})
            self.assertEqual([sbx.exec(fetch).stdout for _ in range(2)], ["65536\n"] * 2)
            self.assertTrue(sbx.exec(fetch).stdout.startswith("failed "))  # what it moved is kept
            for bad in ({"example.com": 10}, {entry: 0}):
                with self.assertRaises(SandboxRunError) as cm:
                    sbx.set_network(self.allow, budgets=bad)
                self.assertEqual(cm.exception.status, 400, bad)
                self.assertIn("budgets", cm.exception.message)
            sbx.set_network(self.allow)
            self.assertEqual(sbx.network_budgets, {})
            self.assertEqual(sbx.exec(fetch).stdout, "65536\n")
        with self.assertRaises(SandboxRunError) as cm:
            Sandbox.create(self.c, ["bash"], timeout=60, network_allow=self.allow, network_budgets={"example.com": 10})
        self.assertEqual(cm.exception.status, 400)


if __name__ == "__main__":
    unittest.main()
