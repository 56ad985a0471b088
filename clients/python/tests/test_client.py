"""The client against a real sandbox-run server.

Skipped unless SANDBOX_RUN_URL names one (SANDBOX_RUN_API_KEY too, if it
has keys):

    SANDBOX_RUN_URL=http://127.0.0.1:8080 python3 -m unittest discover -s clients/python/tests -v
"""

import datetime
import hashlib
import http.server
import io
import json
import os
import secrets
import tempfile
import threading
import time
import unittest

from sandbox_run import (
    CallError,
    Client,
    Event,
    FileInfo,
    Job,
    Language,
    Result,
    SandboxRunError,
    Secret,
    Session,
    Stream,
    TestCase,
)

URL = os.environ.get("SANDBOX_RUN_URL", "")
KEY = os.environ.get("SANDBOX_RUN_API_KEY") or None
# The port of this machine the secrets' stand-in API listens on: the
# server (on this machine too) must allow host.sandbox.internal on it.
PORT = int(os.environ.get("SANDBOX_RUN_TEST_PORT") or 8000)


def setUpModule():
    if not URL:
        raise unittest.SkipTest("SANDBOX_RUN_URL is not set: no server to test against")


def client():
    return Client(URL, api_key=KEY, timeout=120)


class ServerTest(unittest.TestCase):
    def test_health_and_ready(self):
        c = client()
        self.assertEqual(c.health(), {"status": "ok"})
        ready = c.ready()
        self.assertEqual(ready["status"], "ready")
        self.assertIn("workers", ready)
        self.assertIn("/api/sandbox/execute", c.openapi()["paths"])

    def test_languages(self):
        langs = client().languages()
        self.assertTrue(all(isinstance(lang, Language) for lang in langs))
        by_name = {lang.name: lang for lang in langs}
        self.assertIn("python", by_name)
        self.assertIn("bash", by_name)
        py = by_name["python"]
        self.assertTrue(py.version)
        self.assertFalse(py.compiled)
        self.assertGreater(py.default_limits.timeout_seconds, 0)
        self.assertGreater(py.default_limits.memory_mb, 0)
        self.assertTrue(any(v.default and v.available for v in py.versions))
        self.assertEqual(py.raw["name"], "python")


class ExecuteTest(unittest.TestCase):
    def setUp(self):
        self.c = client()

    def test_python(self):
        res = self.c.execute("python", "print('hello')")
        self.assertIsInstance(res, Result)
        self.assertEqual(res.status, "completed")
        self.assertTrue(res.ok)
        self.assertEqual(res.stdout, "hello\n")
        self.assertEqual(res.stdout_bytes, b"hello\n")
        self.assertEqual(res.stderr, "")
        self.assertIsNone(res.stdout_encoding)
        self.assertEqual(res.exit_code, 0)
        self.assertEqual(res.language, "python")
        self.assertTrue(res.version)
        self.assertTrue(res.execution_id)
        self.assertGreater(res.duration_ms, 0)
        self.assertGreaterEqual(res.memory_used_mb, 0)
        self.assertFalse(res.stdout_truncated)
        self.assertEqual(res.raw["stdout"], "hello\n")

    def test_stdin_args_env_files(self):
        res = self.c.execute(
            "bash",
            'read line; echo "$line|$1|$2|$GREETING"; cat t.txt',
            input_data="from stdin\n",
            args=["a", "b c"],
            env={"GREETING": "hi"},
            files={"t.txt": "a text file\n"},
            timeout_seconds=10,
            max_memory_mb=256,
        )
        self.assertEqual((res.status, res.stdout), ("completed", "from stdin|a|b c|hi\na text file\n"), res)

    def test_binary_input(self):
        res = self.c.execute(
            "python",
            "import sys\nprint(sys.stdin.buffer.read().hex(), open('b.bin', 'rb').read().hex())",
            input_data=b"\x00\xff\n",
            files={"b.bin": b"\xfe\x00\x01", "sub/dir/x.txt": "nested"},
        )
        self.assertEqual(res.stdout, "00ff0a fe0001\n", res)

    def test_exit_code_and_stderr(self):
        res = self.c.execute("bash", "echo out; echo oops >&2; exit 3")
        self.assertEqual(res.status, "error_runtime")
        self.assertFalse(res.ok)
        self.assertEqual(res.exit_code, 3)
        self.assertEqual(res.stdout, "out\n")
        self.assertEqual(res.stderr, "oops\n")

    def test_timeout(self):
        res = self.c.execute("bash", "sleep 10", timeout_seconds=1)
        self.assertEqual(res.status, "timeout", res)
        self.assertLess(res.duration_ms, 9000)

    def test_base64_output(self):
        res = self.c.execute("python", "import sys\nsys.stdout.buffer.write(b'\\xff')\nsys.stderr.buffer.write(b'ok\\xfe')")
        self.assertEqual(res.status, "completed", res)
        self.assertEqual(res.stdout_encoding, "base64")
        self.assertEqual(res.raw["stdout"], "/w==")
        self.assertEqual(res.stdout_bytes, b"\xff")
        self.assertEqual(res.stdout, "\ufffd")
        self.assertEqual(res.stderr_bytes, b"ok\xfe")

    def test_output_files(self):
        res = self.c.execute("bash", 'printf "text" > out.txt; mkdir -p d; printf "\\xff\\xfe" > d/bin.dat')
        self.assertEqual(res.status, "completed", res)
        self.assertEqual(res.output_files.get("out.txt"), "text")
        self.assertEqual(res.output_files.get("d/bin.dat"), b"\xff\xfe")
        res = self.c.execute("bash", "echo a > keep.txt; echo b > drop.txt", output_files=["keep.*"])
        self.assertEqual(res.output_files, {"keep.txt": "a\n"})

    def test_test_cases(self):
        res = self.c.execute(
            "python",
            "print(int(input()) * 2)",
            test_cases=[TestCase(input_data="2\n", expected_output="4"), {"input_data": "3\n", "expected_output": "7"}],
        )
        self.assertEqual([c.verdict for c in res.test_cases], ["accepted", "wrong_answer"], res)
        self.assertEqual([c.stdout for c in res.test_cases], ["4\n", "6\n"])
        self.assertEqual((res.summary.total, res.summary.accepted, res.summary.failed), (2, 1, 1))

    def test_call(self):
        code = "def add(a, b):\n    return a + b\n\nclass Calc:\n    def boom(self):\n        raise ValueError('bad thing')\n"
        self.assertEqual(self.c.call("python", code, function="add", params={"a": 1, "b": 2}), 3)
        with self.assertRaises(CallError) as cm:
            self.c.call("python", code, class_name="Calc", method_name="boom")
        self.assertEqual(cm.exception.exception.type, "ValueError")
        self.assertEqual(str(cm.exception), "ValueError: bad thing")
        self.assertEqual(cm.exception.result.status, "error_runtime")

    def test_unknown_language(self):
        for call in (
            lambda: self.c.execute("klingon", "Qapla'"),
            lambda: self.c.stream("klingon", "Qapla'"),
            lambda: self.c.submit("klingon", "Qapla'"),
        ):
            with self.assertRaises(SandboxRunError) as cm:
                call()
            e = cm.exception
            self.assertEqual(e.status, 400)
            self.assertIn("klingon", e.message)
            self.assertIsNone(e.retry_after)
            self.assertFalse(e.retryable)
            self.assertIn("400 Bad Request", str(e))

    def test_unknown_field(self):
        with self.assertRaises(SandboxRunError) as cm:
            self.c.execute("python", "print(1)", no_such_field=1)
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("no_such_field", cm.exception.message)

    def test_async_refused_by_execute(self):
        with self.assertRaises(TypeError):
            self.c.execute("python", "print(1)", **{"async": True})


class StreamTest(unittest.TestCase):
    def setUp(self):
        self.c = client()

    def test_stream(self):
        code = (
            "import sys, time\n"
            "print('first', flush=True)\n"
            "time.sleep(0.3)\n"
            "print('err', file=sys.stderr, flush=True)\n"
            "print('second', flush=True)\n"
        )
        stream = self.c.stream("python", code)
        self.assertIsInstance(stream, Stream)
        events = list(stream)
        self.assertTrue(all(isinstance(ev, Event) for ev in events))
        last = events[-1]
        self.assertEqual(last.type, "result")
        self.assertIsInstance(last.result, Result)
        self.assertIs(stream.result, last.result)
        self.assertEqual(last.result.status, "completed")
        self.assertEqual(last.result.stdout, "first\nsecond\n")
        out = {"stdout": "", "stderr": ""}
        for ev in events[:-1]:
            self.assertIn(ev.type, ("stdout", "stderr"))
            self.assertEqual(ev.offset, len(out[ev.type].encode()), ev)
            out[ev.type] += ev.data
        self.assertEqual(out, {"stdout": "first\nsecond\n", "stderr": "err\n"})
        self.assertTrue(events[0].data.startswith("f"), events)  # flushed before the sleep: not with second
        self.assertNotIn("second", events[0].data)

    def test_stream_bytes(self):
        events = list(self.c.stream("python", "import sys\nsys.stdout.buffer.write(b'\\xff')\nsys.stdout.flush()"))
        chunks = [ev for ev in events if ev.type == "stdout"]
        self.assertEqual(b"".join(ev.data_bytes for ev in chunks), b"\xff")
        self.assertTrue(any(isinstance(ev.data, bytes) and ev.encoding == "base64" for ev in chunks), chunks)
        self.assertEqual(events[-1].result.stdout_bytes, b"\xff")

    def test_stream_wait_and_close(self):
        res = self.c.stream("bash", "echo one; echo two").wait()
        self.assertEqual(res.stdout, "one\ntwo\n")
        start = time.monotonic()
        with self.c.stream("python", "import time\nprint('x', flush=True)\ntime.sleep(60)") as s:
            got = ""
            while got != "x\n":  # print's chunks: "x\n", or "x" and "\n"
                ev = next(s)
                self.assertEqual(ev.type, "stdout")
                got += ev.data
        self.assertEqual(list(s), [])  # closed
        self.assertLess(time.monotonic() - start, 30)

    def test_stream_compile(self):
        langs = {lang.name for lang in self.c.languages()}
        if "c" not in langs:
            self.skipTest("no C toolchain on the server")
        events = list(self.c.stream("c", "int main(void) { return undeclared; }"))
        res = events[-1].result
        self.assertEqual(res.status, "error_compile", res)
        self.assertIsNotNone(res.compile)
        self.assertIn("undeclared", "".join(ev.text for ev in events if ev.type == "compile"))


class JobTest(unittest.TestCase):
    def setUp(self):
        self.c = client()

    def test_submit_job_wait(self):
        job = self.c.submit("bash", "sleep 0.5; echo done", timeout_seconds=20)
        self.assertIsInstance(job, Job)
        self.assertEqual(job.status, "queued")
        self.assertFalse(job.done)
        self.assertTrue(job.execution_id)
        self.assertIsInstance(job.created_at, datetime.datetime)
        state = self.c.job(job.execution_id)
        self.assertIsInstance(state, (Job, Result))
        res = self.c.wait(job.execution_id, timeout=120)
        self.assertIsInstance(res, Result)
        self.assertEqual((res.status, res.stdout), ("completed", "done\n"), res)
        self.assertEqual(res.execution_id, job.execution_id)
        self.assertIsNotNone(res.finished_at)
        self.assertGreaterEqual(res.finished_at, res.created_at)
        again = self.c.job(job.execution_id, wait=True, timeout=5)
        self.assertIsInstance(again, Result)
        self.assertEqual(again.stdout, "done\n")
        self.assertEqual(job.wait().stdout, "done\n")

    def test_wait_timeout(self):
        job = self.c.submit("bash", "sleep 3; echo late")
        with self.assertRaises(TimeoutError):
            self.c.wait(job.execution_id, timeout=0.5)
        got = job.refresh(wait=True, timeout=30)
        if isinstance(got, Job):
            got = got.wait(timeout=60)
        self.assertEqual(got.stdout, "late\n")

    def test_unknown_job(self):
        with self.assertRaises(SandboxRunError) as cm:
            self.c.job("no-such-execution")
        self.assertEqual(cm.exception.status, 404)


class FilesTest(unittest.TestCase):
    def setUp(self):
        self.c = client()

    def test_files(self):
        text = self.c.upload_file("hello.txt", "hello file\n")
        self.assertIsInstance(text, FileInfo)
        self.assertEqual((text.name, text.size), ("hello.txt", 11))
        self.assertEqual(text.sha256, hashlib.sha256(b"hello file\n").hexdigest())
        self.assertIsInstance(text.expires_at, datetime.datetime)
        self.assertEqual(self.c.file_info(text.file_id).sha256, text.sha256)
        self.assertEqual(self.c.file_content(text.file_id), b"hello file\n")

        blob = self.c.upload_file("blob.bin", b"\x00\xff\x10")
        self.assertEqual(self.c.file_content(blob.file_id), b"\x00\xff\x10")
        anon = self.c.upload_file(None, io.BytesIO(b"from a stream"))
        self.assertEqual((anon.name, self.c.file_content(anon.file_id)), ("", b"from a stream"))
        with tempfile.TemporaryFile() as f:
            f.write(b"#" * 100000 + b"\n")
            f.seek(0)
            big = self.c.upload_file("big.txt", f)
        self.assertEqual(big.size, 100001)

        ids = {f.file_id for f in self.c.list_files()}
        self.assertTrue({text.file_id, blob.file_id, anon.file_id, big.file_id} <= ids)

        script = self.c.upload_file("main.py", "print(open('in.txt').read().strip(), open('b.bin', 'rb').read().hex())")
        res = self.c.execute("python", script, files={"in.txt": text, "b.bin": blob})
        self.assertEqual(res.stdout, "hello file 00ff10\n", res)

        for info in (text, blob, anon, big, script):
            self.c.delete_file(info.file_id)
        with self.assertRaises(SandboxRunError) as cm:
            self.c.file_content(text.file_id)
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(SandboxRunError) as cm:
            self.c.execute("python", "print(1)", files={"x": text})
        self.assertEqual(cm.exception.status, 400)


class SessionTest(unittest.TestCase):
    def setUp(self):
        self.c = client()

    def test_session(self):
        s = self.c.create_session("bash", timeout_seconds=20)
        self.assertIsInstance(s, Session)
        self.assertEqual((s.language, s.interpreter, s.timeout_seconds), ("bash", False, 20))
        self.assertTrue(s.session_id)
        self.assertIsInstance(s.expires_at, datetime.datetime)
        try:
            self.assertEqual(s.run("echo one > a.txt; mkdir -p d; printf '\\xff' > d/b.bin; echo ran").stdout, "ran\n")
            self.assertEqual(s.run("cat a.txt").stdout, "one\n")
            got = self.c.session(s.session_id)
            paths = [f.path for f in got.files]
            self.assertIn("a.txt", paths)
            self.assertIn("d/b.bin", paths)
            self.assertGreater(got.bytes_used, 0)
            self.assertEqual(s.read_file("a.txt"), b"one\n")
            self.assertEqual(self.c.session_file(s.session_id, "d/b.bin"), b"\xff")
            self.assertIn(s.session_id, [x.session_id for x in self.c.sessions()])
            res = s.stream("cat a.txt").wait()
            self.assertEqual(res.stdout, "one\n")
            self.assertEqual(s.submit("cat a.txt").wait(timeout=120).stdout, "one\n")
            s.delete_file("a.txt")
            self.assertNotIn("a.txt", [f.path for f in s.refresh().files])
            with self.assertRaises(SandboxRunError) as cm:
                s.read_file("a.txt")
            self.assertEqual(cm.exception.status, 404)
        finally:
            self.c.delete_session(s.session_id)
        with self.assertRaises(SandboxRunError) as cm:
            self.c.session(s.session_id)
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(SandboxRunError) as cm:
            s.run("echo gone")
        self.assertEqual(cm.exception.status, 400)

    def test_interpreter(self):
        with self.c.create_session("python", interpreter=True) as py:
            self.assertTrue(py.interpreter)
            first = py.run("x = 41")
            self.assertEqual(first.status, "completed", first)
            self.assertIsNone(first.result)
            cell = py.run("x + 1")
            self.assertEqual(cell.result["text/plain"], "42", cell)
            cell = py.run("print('printed')\ndisplay({'a': 1})")
            self.assertEqual(cell.stdout, "printed\n")
            self.assertEqual(cell.display, [{"text/plain": "{'a': 1}"}])
            cell = py.run("raise ValueError('no')")
            self.assertEqual(cell.status, "error_runtime")
            self.assertEqual((cell.exception.type, cell.exception.message), ("ValueError", "no"))
            self.assertIn("Traceback", cell.exception.traceback)
            events = list(py.stream("print('live', flush=True)\nx * 2"))
            self.assertEqual("".join(ev.data for ev in events if ev.type == "stdout"), "live\n")
            self.assertEqual(events[-1].result.result["text/plain"], "82")
            self.assertFalse(events[-1].result.restarted)
        with self.assertRaises(SandboxRunError) as cm:
            self.c.session(py.session_id)
        self.assertEqual(cm.exception.status, 404)

    def test_interpreter_needs_python(self):
        with self.assertRaises(SandboxRunError) as cm:
            self.c.create_session("bash", interpreter=True)
        self.assertEqual(cm.exception.status, 400)


class _Upstream(http.server.BaseHTTPRequestHandler):
    """A stand-in for the API a secret is for: keeps what each request
    carried (its Authorization header and target) and answers "upstream ok"."""

    got = []

    def do_GET(self):
        type(self).got.append((self.headers.get("Authorization"), self.path))
        body = b"upstream ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class SecretsTest(unittest.TestCase):
    """Secrets against the real server: runs reach a stand-in API on this
    machine's PORT as host.sandbox.internal:PORT (SANDBOX_RUN_TEST_PORT; the
    server's network.allow must list it). The API gets the value; the
    program, its result and every listing only the placeholder."""

    def setUp(self):
        self.c = client()
        _Upstream.got = []
        self.api = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), _Upstream)
        threading.Thread(target=self.api.serve_forever, daemon=True).start()
        self.addCleanup(self.api.server_close)
        self.addCleanup(self.api.shutdown)
        self.allow = ["host.sandbox.internal:%d" % PORT]
        self.name = "SDK_TOKEN_" + secrets.token_hex(4).upper()
        self.value = "sk-sdk-test-" + secrets.token_hex(16)

    def tearDown(self):
        try:
            self.c.delete_secret(self.name)
        except SandboxRunError:
            pass

    def test_secrets(self):
        sec = self.c.put_secret(self.name, self.value, hosts=["host.sandbox.internal"], header=("Authorization", "Bearer {value}"))
        self.assertIsInstance(sec, Secret)
        self.assertEqual((sec.name, sec.hosts, sec.header.name, sec.header.format),
                         (self.name, ["host.sandbox.internal"], "Authorization", "Bearer {value}"))
        self.assertIsInstance(sec.created, datetime.datetime)
        self.assertIsInstance(sec.updated, datetime.datetime)
        self.assertNotIn(self.value, json.dumps(sec.raw) + repr(sec))
        listed = {x.name: x for x in self.c.list_secrets()}
        self.assertIn(self.name, listed)
        self.assertEqual(listed[self.name].hosts, ["host.sandbox.internal"])
        self.assertEqual(listed[self.name].header.format, "Bearer {value}")
        self.assertNotIn(self.value, json.dumps([x.raw for x in listed.values()]))

        # The program sees a placeholder; the API gets the value, in the
        # header and in place of the placeholder in the URL.
        code = (
            "import os, sys, urllib.request\n"
            "token = os.environ[sys.argv[1]]\n"
            "print(token)\n"
            "print(urllib.request.urlopen('http://%s/v1/me?key=' + token, timeout=30).read().decode())\n" % self.allow[0]
        )
        res = self.c.execute("python", code, args=[self.name], secrets=[self.name], network=self.allow)
        self.assertEqual(res.status, "completed", res)
        placeholder, answer = res.stdout.splitlines()
        self.assertTrue(placeholder.startswith("SANDBOX_RUN_SECRET_%s_" % self.name), placeholder)
        self.assertEqual(answer, "upstream ok")
        self.assertNotIn(self.value, json.dumps(res.raw))
        self.assertEqual(_Upstream.got, [("Bearer " + self.value, "/v1/me?key=" + self.value)])
        self.assertEqual(len(res.network.requests), 1, res.network)
        req = res.network.requests[0]
        self.assertEqual((req.scheme, req.method, req.path, req.status, req.secrets),
                         ("http", "GET", "/v1/me?key=" + placeholder, 200, [self.name]))
        self.assertIn("host.sandbox.internal", req.host)
        self.assertGreater(req.bytes_in, 0)

        # The same through a stream and an async job.
        _Upstream.got = []
        streamed = self.c.stream("python", code, args=[self.name], secrets=[self.name], network=self.allow).wait()
        self.assertEqual(streamed.stdout.splitlines()[1], "upstream ok", streamed)
        job = self.c.submit("python", code, args=[self.name], secrets=self.name, network=self.allow)
        done = job.wait(timeout=120)
        self.assertEqual(done.stdout.splitlines()[1], "upstream ok", done)
        self.assertEqual(done.network.requests[0].secrets, [self.name])
        self.assertEqual([a for a, _ in _Upstream.got], ["Bearer " + self.value] * 2)
        self.assertNotIn(self.value, streamed.stdout + done.stdout)

        # Refusals: a name the key has no secret by, a run without network,
        # bad input.
        for kw in ({"secrets": ["NO_SUCH_SECRET"], "network": self.allow}, {"secrets": [self.name]}):
            with self.assertRaises(SandboxRunError) as cm:
                self.c.execute("python", "print(1)", **kw)
            self.assertEqual(cm.exception.status, 400, kw)
        with self.assertRaises(SandboxRunError) as cm:
            self.c.put_secret(self.name + "_X", self.value, hosts=[])
        self.assertEqual(cm.exception.status, 400)
        self.assertNotIn(self.value, str(cm.exception))

        # Deleted: no longer listed nor usable.
        self.c.delete_secret(self.name)
        self.assertNotIn(self.name, [x.name for x in self.c.list_secrets()])
        with self.assertRaises(SandboxRunError) as cm:
            self.c.execute("python", code, args=[self.name], secrets=[self.name], network=self.allow)
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(SandboxRunError) as cm:
            self.c.delete_secret(self.name)
        self.assertEqual(cm.exception.status, 404)

    def test_interpreter_session_secrets(self):
        # An interpreter session made with secrets: its cells see the
        # placeholder, and each cell's request gets the value the store has
        # as the cell starts.
        self.c.put_secret(self.name, self.value, hosts=["host.sandbox.internal"], header=("Authorization", "Bearer {value}"))
        with self.c.create_session("python", interpreter=True, secrets=[self.name], network=self.allow) as sess:
            self.assertEqual(sess.secrets, [self.name])
            get = "urllib.request.urlopen('http://%s/cell', timeout=30).read().decode()" % self.allow[0]
            first = sess.run("import os, urllib.request\ntok = os.environ[%r]\n%s" % (self.name, get))
            self.assertEqual(first.status, "completed", first)
            rotated = self.value + "-rotated"
            self.c.put_secret(self.name, rotated, hosts=["host.sandbox.internal"], header=("Authorization", "Bearer {value}"))
            second = sess.run("print(os.environ[%r] == tok)\n%s" % (self.name, get))
            self.assertEqual((second.status, second.stdout), ("completed", "True\n"), second)
            self.assertEqual([a for a, _ in _Upstream.got], ["Bearer " + self.value, "Bearer " + rotated])
            with self.assertRaises(SandboxRunError) as cm:
                sess.run("1", secrets=["OTHER_NAME"])
            self.assertEqual(cm.exception.status, 400)


if __name__ == "__main__":
    unittest.main()
