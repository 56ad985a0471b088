"""What needs no real server: request bodies, decoding, and the answers a
real server rarely gives (Retry-After, stream errors), from a fake one."""

import base64
import datetime
import http.server
import json
import threading
import unittest

from sandbox_run import (
    Client,
    Event,
    FileInfo,
    HTTPRequest,
    Result,
    SandboxRunError,
    Secret,
    SecretHeader,
    TestCase,
    build_request,
)
from sandbox_run.errors import parse_retry_after
from sandbox_run.models import parse_time


class RequestTest(unittest.TestCase):
    def test_build_request(self):
        body = build_request(
            "python",
            FileInfo(file_id="f1"),
            input_data=b"\xff",
            files={"a.txt": "text", "b.bin": b"\x00\xff", "c": FileInfo(file_id="f2")},
            args=("x",),
            env={"K": "V"},
            timeout_seconds="auto",
            network=["pypi.org:443"],
            test_cases=[TestCase(input_data="1\n", expected_output="2"), {"input_data": "3"}],
            image=None,
        )
        self.assertEqual(
            body,
            {
                "language": "python",
                "code": {"file_id": "f1"},
                "input_data": "/w==",
                "input_data_encoding": "base64",
                "files": {"a.txt": "text", "b.bin": {"content": "AP8=", "encoding": "base64"}, "c": {"file_id": "f2"}},
                "args": ["x"],
                "env": {"K": "V"},
                "timeout_seconds": "auto",
                "network": {"allow": ["pypi.org:443"]},
                "test_cases": [{"input_data": "1\n", "expected_output": "2"}, {"input_data": "3"}],
            },
        )
        with self.assertRaises(TypeError):
            build_request("python", 42)

    def test_build_request_secrets(self):
        body = build_request("python", "x", secrets=("API_TOKEN", "OTHER"), network=["api.example.com"])
        self.assertEqual(body["secrets"], ["API_TOKEN", "OTHER"])
        self.assertEqual(body["network"], {"allow": ["api.example.com"]})
        self.assertEqual(build_request("python", "x", secrets="ONE")["secrets"], ["ONE"])
        self.assertNotIn("secrets", build_request("python", "x"))


class DecodeTest(unittest.TestCase):
    def test_result(self):
        bad_path = base64.b64encode(b"caf\xe9.txt").decode()
        res = Result.from_json(
            {
                "execution_id": "e1",
                "status": "completed",
                "stdout": base64.b64encode(b"a\xffb").decode(),
                "stdout_encoding": "base64",
                "stderr": "plain",
                "exit_code": 0,
                "duration_ms": 1.5,
                "output_files": {
                    "t.txt": "text",
                    "b.bin": {"content": "AP8=", "encoding": "base64"},
                    "caf\ufffd.txt": {"content": "x", "encoding": "utf-8", "path": bad_path, "path_encoding": "base64"},
                },
                "compile": {"status": "completed", "stdout": "", "stderr": "warn", "cache_hit": True},
                "return_value": None,
                "created_at": "2026-11-26T10:47:36.123456789Z",
                "finished_at": "2026-11-26T11:47:36+01:00",
                "started_at": "0001-01-01T00:00:00Z",
                "future_field": 7,
            }
        )
        self.assertEqual(res.stdout_bytes, b"a\xffb")
        self.assertEqual(res.stdout, "a\ufffdb")
        self.assertEqual(res.stderr_bytes, b"plain")
        self.assertEqual(res.output_files["t.txt"], "text")
        self.assertEqual(res.output_files["b.bin"], b"\x00\xff")
        self.assertEqual(res.output_files["caf\udce9.txt"], "x")
        self.assertTrue(res.compile.cache_hit)
        self.assertEqual(res.compile.stderr, "warn")
        self.assertTrue(res.has_return_value)
        self.assertIsNone(res.return_value)
        self.assertFalse(Result.from_json({}).has_return_value)
        self.assertEqual(res.created_at, datetime.datetime(2026, 11, 26, 10, 47, 36, 123456, tzinfo=datetime.timezone.utc))
        self.assertEqual(res.finished_at, datetime.datetime(2026, 11, 26, 10, 47, 36, tzinfo=datetime.timezone.utc))
        self.assertIsNone(res.started_at)
        self.assertEqual(res.raw["future_field"], 7)

    def test_network_requests(self):
        res = Result.from_json(
            {
                "status": "completed",
                "network": {
                    "destinations": [{"host": "api.example.com", "port": 443, "protocol": "tcp", "allowed": True, "connections": 1}],
                    "allowed": 1,
                    "requests": [
                        {"scheme": "https", "host": "api.example.com", "method": "GET", "path": "/v1?k=SANDBOX_RUN_SECRET_T_00",
                         "status": 200, "bytes_out": 120, "bytes_in": 512, "secrets": ["T"]},
                        {"scheme": "http", "host": "api.example.com", "method": "POST", "path": "/", "status": 0, "error": "refused"},
                    ],
                    "requests_dropped": 3,
                },
            }
        )
        net = res.network
        self.assertEqual(net.destinations[0].host, "api.example.com")
        self.assertEqual(net.requests_dropped, 3)
        self.assertEqual(len(net.requests), 2)
        first, second = net.requests
        self.assertIsInstance(first, HTTPRequest)
        self.assertEqual((first.scheme, first.method, first.status, first.bytes_out, first.bytes_in, first.secrets),
                         ("https", "GET", 200, 120, 512, ["T"]))
        self.assertEqual((second.status, second.secrets, second.error), (0, [], "refused"))
        # A report from a run without secrets has no requests.
        plain = Result.from_json({"network": {"destinations": [], "allowed": 0, "denied": 1}}).network
        self.assertEqual((plain.requests, plain.requests_dropped, plain.denied), ([], 0, 1))

    def test_secret(self):
        sec = Secret.from_json(
            {
                "name": "API_TOKEN",
                "hosts": ["api.example.com", "*.example.com:8443"],
                "header": {"name": "Authorization", "format": "Bearer {value}"},
                "created": "2026-01-02T03:04:05.123456789Z",
                "updated": "2026-01-03T03:04:05Z",
            }
        )
        self.assertEqual(sec.name, "API_TOKEN")
        self.assertEqual(sec.hosts, ["api.example.com", "*.example.com:8443"])
        self.assertEqual(sec.header, SecretHeader("Authorization", "Bearer {value}"))
        self.assertEqual(sec.created, datetime.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.timezone.utc))
        self.assertEqual(sec.updated.day, 3)
        self.assertNotIn("raw", repr(sec))
        bare = Secret.from_json({"name": "X", "hosts": ["h"]})
        self.assertIsNone(bare.header)

    def test_event(self):
        ev = Event.from_json({"offset": 3, "data": "/w==", "encoding": "base64"}, type="stdout")
        self.assertEqual((ev.type, ev.offset, ev.data, ev.text), ("stdout", 3, b"\xff", "\ufffd"))
        ev = Event.from_json({"type": "stderr", "offset": 0, "data": "hi"})
        self.assertEqual((ev.type, ev.data, ev.data_bytes), ("stderr", "hi", b"hi"))

    def test_times_and_retry_after(self):
        self.assertIsNone(parse_time("yesterday"))
        self.assertEqual(parse_time("2026-01-02T03:04:05Z").year, 2026)
        self.assertEqual(parse_retry_after("5"), 5.0)
        self.assertIsNone(parse_retry_after("0"))
        self.assertIsNone(parse_retry_after(""))
        self.assertEqual(parse_retry_after("Thu, 01 Jan 2037 00:00:10 GMT", now=2114380800.0), 10.0)


class _Fake(http.server.BaseHTTPRequestHandler):
    """Answers as the test's routes say: path → (status, headers, body)."""

    routes = {}
    seen = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        type(self).seen.append((self.command, self.path, self.headers, body))
        status, headers, payload = self.routes.get(self.path.split("?")[0], (404, {}, b'{"error":"no route"}'))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args):
        pass


class FakeServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
        threading.Thread(target=cls.srv.serve_forever, daemon=True).start()
        cls.client = Client("http://127.0.0.1:%d/" % cls.srv.server_address[1], api_key="k1", timeout=10)

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()

    def setUp(self):
        _Fake.routes = {}
        _Fake.seen = []

    def route(self, path, status, body, **headers):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        headers = {k.replace("_", "-"): v for k, v in headers.items()}
        headers.setdefault("Content-Type", "application/json")
        _Fake.routes[path] = (status, headers, body)

    def test_retry_after_and_auth(self):
        self.route("/api/sandbox/execute", 503, {"error": "the queue is full"}, Retry_After="2")
        with self.assertRaises(SandboxRunError) as cm:
            self.client.execute("python", "print(1)")
        e = cm.exception
        self.assertEqual((e.status, e.message, e.retry_after, e.retryable), (503, "the queue is full", 2.0, True))
        self.assertEqual(str(e), "server answered 503 Service Unavailable: the queue is full (retry after 2s)")
        method, path, headers, body = _Fake.seen[0]
        self.assertEqual((method, path), ("POST", "/api/sandbox/execute"))
        self.assertEqual(headers["Authorization"], "Bearer k1")
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertEqual(json.loads(body), {"language": "python", "code": "print(1)"})

    def test_text_error_and_setup_error(self):
        self.route("/healthz", 502, b"bad gateway\n", Content_Type="text/plain")
        with self.assertRaises(SandboxRunError) as cm:
            self.client.health()
        self.assertEqual((cm.exception.status, cm.exception.message), (502, "bad gateway"))
        self.route("/api/sandbox/execute", 500, {"execution_id": "e9", "status": "error_setup", "error": "no cgroup"})
        with self.assertRaises(SandboxRunError) as cm:
            self.client.execute("python", "print(1)")
        e = cm.exception
        self.assertEqual((e.status, e.message, e.execution_id), (500, "no cgroup", "e9"))
        self.assertEqual(e.result.status, "error_setup")

    def sse(self, *events):
        out = b": keepalive\n\n"
        for name, payload in events:
            out += b"event: " + name.encode() + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"
        return out

    def test_stream_events(self):
        body = self.sse(
            ("stdout", {"type": "stdout", "offset": 0, "data": "a\n"}),
            ("stderr", {"type": "stderr", "offset": 0, "data": "/w==", "encoding": "base64"}),
            ("result", {"execution_id": "e1", "status": "completed", "stdout": "a\n", "stderr": "/w==", "stderr_encoding": "base64"}),
        )
        self.route("/api/sandbox/execute", 200, body, Content_Type="text/event-stream")
        events = list(self.client.stream("python", "x"))
        self.assertEqual([(e.type, e.data) for e in events[:2]], [("stdout", "a\n"), ("stderr", b"\xff")])
        self.assertEqual(events[2].type, "result")
        self.assertEqual(events[2].result.stderr_bytes, b"\xff")
        self.assertEqual(_Fake.seen[0][2]["Accept"], "text/event-stream")

    def test_stream_error_event(self):
        body = self.sse(("stdout", {"offset": 0, "data": "a"}),
                        ("error", {"error": "execution canceled", "status": 503, "execution_id": "exec_1"}))
        self.route("/api/sandbox/execute", 200, body, Content_Type="text/event-stream")
        stream = self.client.stream("python", "x")
        self.assertEqual(next(stream).data, "a")
        with self.assertRaises(SandboxRunError) as cm:
            next(stream)
        e = cm.exception
        self.assertEqual((e.status, e.message, e.execution_id), (503, "execution canceled", "exec_1"))

    def test_stream_error_event_without_status(self):
        # A server from before the event carried its status.
        body = self.sse(("error", {"error": "execution canceled"}))
        self.route("/api/sandbox/execute", 200, body, Content_Type="text/event-stream")
        with self.assertRaises(SandboxRunError) as cm:
            next(self.client.stream("python", "x"))
        self.assertEqual((cm.exception.status, cm.exception.message), (200, "execution canceled"))

    def test_stream_cut_short(self):
        self.route("/api/sandbox/execute", 200, self.sse(("stdout", {"offset": 0, "data": "a"})), Content_Type="text/event-stream")
        with self.assertRaises(ConnectionError):
            list(self.client.stream("python", "x"))

    def test_stream_refused(self):
        self.route("/api/sandbox/execute", 429, {"error": "rate limit"}, Retry_After="1")
        with self.assertRaises(SandboxRunError) as cm:
            self.client.stream("python", "x")
        self.assertEqual((cm.exception.status, cm.exception.retry_after), (429, 1.0))

    def test_secrets(self):
        value = "sk-never-shown-0123456789"
        listed = {"name": "API_TOKEN", "hosts": ["api.example.com"], "header": {"name": "Authorization", "format": "Bearer {value}"},
                  "created": "2026-01-02T03:04:05Z", "updated": "2026-01-02T03:04:05Z"}
        self.route("/api/sandbox/secrets/API_TOKEN", 200, listed)
        sec = self.client.put_secret("API_TOKEN", value, hosts="api.example.com", header=("Authorization", "Bearer {value}"))
        self.assertEqual((sec.name, sec.hosts, sec.header.format), ("API_TOKEN", ["api.example.com"], "Bearer {value}"))
        self.assertNotIn(value, repr(sec) + repr(self.client))
        method, path, headers, body = _Fake.seen[-1]
        self.assertEqual((method, path, headers["Content-Type"]), ("PUT", "/api/sandbox/secrets/API_TOKEN", "application/json"))
        self.assertEqual(json.loads(body), {"value": value, "hosts": ["api.example.com"],
                                            "header": {"name": "Authorization", "format": "Bearer {value}"}})
        # The header's other forms; none: no header.
        for header, want in (
            ({"name": "X-Key"}, {"name": "X-Key"}),
            ("X-Key", {"name": "X-Key"}),
            (SecretHeader("Authorization", "token {value}"), {"name": "Authorization", "format": "token {value}"}),
            (["X-Key"], {"name": "X-Key"}),
        ):
            self.client.put_secret("API_TOKEN", value, ["a.example.com", "*.b.example.com:8443"], header)
            sent = json.loads(_Fake.seen[-1][3])
            self.assertEqual(sent, {"value": value, "hosts": ["a.example.com", "*.b.example.com:8443"], "header": want})
        self.client.put_secret("API_TOKEN", value, ["a.example.com"])
        self.assertNotIn("header", json.loads(_Fake.seen[-1][3]))
        with self.assertRaises(TypeError):
            self.client.put_secret("API_TOKEN", value, ["a.example.com"], ("a", "b", "c"))
        # A name travels as one path segment.
        self.route("/api/sandbox/secrets/a%2Fb", 400, {"error": "name: bad"})
        with self.assertRaises(SandboxRunError) as cm:
            self.client.put_secret("a/b", value, ["h"])
        self.assertEqual(cm.exception.status, 400)
        self.assertNotIn(value, str(cm.exception))

        self.route("/api/sandbox/secrets", 200, {"secrets": [listed, {"name": "OTHER", "hosts": ["x.example.com"]}]})
        got = self.client.list_secrets()
        self.assertEqual([(s.name, s.header is None) for s in got], [("API_TOKEN", False), ("OTHER", True)])
        self.assertEqual(_Fake.seen[-1][:2], ("GET", "/api/sandbox/secrets"))

        self.route("/api/sandbox/secrets/API_TOKEN", 204, b"")
        self.assertIsNone(self.client.delete_secret("API_TOKEN"))
        self.assertEqual(_Fake.seen[-1][:2], ("DELETE", "/api/sandbox/secrets/API_TOKEN"))
        self.route("/api/sandbox/secrets/GONE", 404, {"error": "secrets: no secret GONE"})
        with self.assertRaises(SandboxRunError) as cm:
            self.client.delete_secret("GONE")
        self.assertEqual(cm.exception.status, 404)

    def test_execute_and_submit_send_secrets(self):
        self.route("/api/sandbox/execute", 200, {"status": "completed", "network": {"requests": [{"method": "GET", "secrets": ["T"]}]}})
        res = self.client.execute("python", "x", secrets=["T"], network=["api.example.com"])
        self.assertEqual(res.network.requests[0].secrets, ["T"])
        self.assertEqual(json.loads(_Fake.seen[-1][3]),
                         {"language": "python", "code": "x", "secrets": ["T"], "network": {"allow": ["api.example.com"]}})
        self.route("/api/sandbox/executions", 202, {"execution_id": "j1", "status": "queued"})
        self.client.submit("python", "x", secrets=["T"], network=["api.example.com"])
        self.assertEqual(json.loads(_Fake.seen[-1][3])["secrets"], ["T"])

    def test_job_states(self):
        self.route("/api/sandbox/executions/j1", 200, {"execution_id": "j1", "status": "running", "started_at": "2026-01-01T00:00:00Z"})
        job = self.client.job("j1", wait=True, timeout=1.5)
        self.assertEqual((job.status, job.done, job.started_at.year), ("running", False, 2026))
        self.assertEqual(_Fake.seen[0][1], "/api/sandbox/executions/j1?wait=true&timeout=1.5")
        self.route("/api/sandbox/executions/j1", 200, {"execution_id": "j1", "status": "timeout", "stdout": ""})
        res = job.wait(timeout=5)
        self.assertEqual((res.status, res.done), ("timeout", True))


if __name__ == "__main__":
    unittest.main()
