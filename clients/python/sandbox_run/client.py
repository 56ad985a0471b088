"""The sandbox-run HTTP client (standard library only)."""

from __future__ import annotations

import base64
import io
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, BinaryIO, Dict, List, Mapping, Optional, Sequence, Union

from .errors import CallError, SandboxRunError, parse_retry_after
from .models import Event, FileInfo, Job, Language, Result, Secret, SecretHeader, Session, TestCase

__all__ = ["Client", "Stream", "build_request"]

__version__ = "0.1.0"

_USER_AGENT = "sandbox-run-python/" + __version__
_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_UNSET: Any = object()

Content = Union[str, bytes, bytearray, memoryview, FileInfo, Mapping[str, Any]]


# --- requests ----------------------------------------------------------------------


def _code_value(code: Any) -> Any:
    if isinstance(code, FileInfo):
        return code.ref
    if isinstance(code, (bytes, bytearray, memoryview)):
        return bytes(code).decode("utf-8")  # code is text: the server refuses anything else
    if isinstance(code, Mapping):
        return dict(code)  # {"file_id": ...}
    if not isinstance(code, str):
        raise TypeError("code must be str, bytes (UTF-8) or a FileInfo, not %s" % type(code).__name__)
    return code


def _file_value(name: str, value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"content": base64.b64encode(bytes(value)).decode("ascii"), "encoding": "base64"}
    if isinstance(value, FileInfo):
        return value.ref
    if isinstance(value, Mapping):
        return dict(value)  # {"file_id": ...} or {"content": ..., "encoding": ...}
    raise TypeError("files[%r] must be str, bytes or a FileInfo, not %s" % (name, type(value).__name__))


def _network_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        return {"allow": [value]}
    return {"allow": list(value)}


def _extra_value(key: str, value: Any) -> Any:
    if key == "network":
        return _network_value(value)
    if key == "test_cases":
        return [c.to_json() if isinstance(c, TestCase) else dict(c) for c in value]
    if key in ("output_files", "args"):
        return list(value)
    return value


def build_request(
    language: str,
    code: Any,
    *,
    input_data: Union[str, bytes, None] = None,
    files: Optional[Mapping[str, Content]] = None,
    args: Optional[Sequence[str]] = None,
    env: Optional[Mapping[str, str]] = None,
    timeout_seconds: Union[float, str, None] = None,
    max_memory_mb: Optional[int] = None,
    version: Optional[str] = None,
    session_id: Optional[str] = None,
    secrets: Optional[Sequence[str]] = None,
    **extra: Any,
) -> Dict[str, Any]:
    """The JSON body of an execution (POST /api/sandbox/execute).

    code is str, UTF-8 bytes, or a FileInfo (a stored file). input_data is
    str, or bytes (sent base64). files maps a path under /work to str, bytes
    (sent base64) or a FileInfo. timeout_seconds may be "auto". secrets
    names secrets of the key (Client.put_secret) the run uses without
    seeing them: each is in its environment under its name as a
    placeholder, which the server puts the value in place of in the run's
    HTTP and HTTPS requests to the secret's hosts (give network= with
    them). Other fields of the API go as keywords by their JSON names (image,
    cpu_time_seconds, max_processes, max_output_bytes, max_file_size_bytes,
    compile_timeout_seconds, output_files, max_response_bytes, network (a
    list of destinations or {"allow": [...]}), test_cases (TestCase or
    dicts), compare, float_tolerance, entrypoint, ...); None is left out.
    """
    body: Dict[str, Any] = {"language": language, "code": _code_value(code)}
    if input_data is not None:
        if isinstance(input_data, (bytes, bytearray, memoryview)):
            body["input_data"] = base64.b64encode(bytes(input_data)).decode("ascii")
            body["input_data_encoding"] = "base64"
        else:
            body["input_data"] = input_data
    if files:
        body["files"] = {name: _file_value(name, v) for name, v in files.items()}
    if args is not None:
        body["args"] = list(args)
    if env is not None:
        body["env"] = dict(env)
    if timeout_seconds is not None:
        body["timeout_seconds"] = timeout_seconds
    if max_memory_mb is not None:
        body["max_memory_mb"] = max_memory_mb
    if version is not None:
        body["version"] = version
    if session_id is not None:
        body["session_id"] = session_id
    if secrets is not None:
        body["secrets"] = [secrets] if isinstance(secrets, str) else [str(n) for n in secrets]
    for key, value in extra.items():
        if value is not None:
            body[key] = _extra_value(key, value)
    return body


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


# --- streaming ------------------------------------------------------------------------


class Stream:
    """The events of a streamed execution (Client.stream), as an iterator:
    Event objects for output chunks as the program produces them, and last
    an Event of type "result" whose .result is the Result (also kept in
    Stream.result). An "error" event (the run could not finish) raises
    SandboxRunError. Close it (or use it as a context manager) to stop
    early: the server then kills the run."""

    def __init__(self, response: Any) -> None:
        self._resp = response
        self._done = False
        self.result: Optional[Result] = None

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Event:
        if self._done:
            raise StopIteration
        try:
            while True:
                got = self._read_event()
                if got is None:
                    raise ConnectionError("the event stream ended without a result")
                name, data = got
                if name == "result":
                    self.result = Result.from_json(json.loads(data))
                    self.close()
                    return Event(type="result", result=self.result)
                if name == "error":
                    try:
                        e = json.loads(data)
                    except ValueError:
                        e = {"error": data.decode("utf-8", "replace")}
                    status = e.get("status")
                    if not isinstance(status, int) or not status:
                        status = 200  # a server from before the event carried one
                    raise SandboxRunError(status, str(e.get("error") or ""), execution_id=e.get("execution_id") or None)
                try:
                    payload = json.loads(data)
                except ValueError:
                    continue
                if isinstance(payload, dict):
                    return Event.from_json(payload, type=name)
        except BaseException:
            self.close()
            raise

    def _read_event(self) -> Optional[tuple]:
        """The next event's name and data (Server-Sent Events), None at the end."""
        name, lines = "message", []
        while True:
            line = self._resp.readline()
            if not line:
                return (name, b"\n".join(lines)) if lines else None
            line = line.rstrip(b"\n").rstrip(b"\r")
            if not line:
                if lines:
                    return name, b"\n".join(lines)
                name = "message"
                continue
            if line.startswith(b":"):
                continue  # a comment: the keepalive
            key, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if key == b"event":
                name = value.decode("utf-8", "replace")
            elif key == b"data":
                lines.append(value)

    def wait(self) -> Result:
        """Reads the rest of the stream and returns the result."""
        for _ in self:
            pass
        if self.result is None:  # pragma: no cover - __next__ raises first
            raise ConnectionError("the event stream ended without a result")
        return self.result

    def close(self) -> None:
        """Stops reading (the server kills a run whose client went away)."""
        self._done = True
        resp, self._resp = self._resp, _Closed()
        try:
            resp.close()
        except Exception:
            pass

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Closed:
    def readline(self) -> bytes:
        return b""

    def close(self) -> None:
        pass


# --- the client --------------------------------------------------------------------------


class Client:
    """A client of one sandbox-run server.

    base_url is the server's address (a path prefix is kept); api_key, if
    given, goes as "Authorization: Bearer <key>". timeout is how many
    seconds to wait for the server on one socket operation, over and above
    an execution's own time limits (None: wait forever).

    Answers other than 2xx raise SandboxRunError; network failures raise
    OSError (urllib.error.URLError, TimeoutError, ConnectionError).
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8080", api_key: Optional[str] = None, timeout: Optional[float] = 60) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        handlers: List[Any] = []
        host = urllib.parse.urlsplit(self.base_url).hostname or ""
        if host.lower() in _LOOPBACK or host.startswith("127."):
            handlers.append(urllib.request.ProxyHandler({}))  # never proxy this machine
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        return "Client(%r)" % self.base_url

    # --- executions ---

    def execute(
        self,
        language: str,
        code: Any,
        *,
        input_data: Union[str, bytes, None] = None,
        files: Optional[Mapping[str, Content]] = None,
        args: Optional[Sequence[str]] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout_seconds: Union[float, str, None] = None,
        max_memory_mb: Optional[int] = None,
        version: Optional[str] = None,
        session_id: Optional[str] = None,
        secrets: Optional[Sequence[str]] = None,
        **extra: Any,
    ) -> Result:
        """Runs code and returns its Result (POST /api/sandbox/execute).

        A program that fails is still a Result (status error_runtime,
        timeout, error_compile); SandboxRunError is for requests the server
        refused (an unknown language is a 400) or could not run. See
        build_request for the arguments.
        """
        if extra.get("async"):
            raise TypeError("execute waits for the result: use submit() for an asynchronous execution")
        body = build_request(language, code, input_data=input_data, files=files, args=args, env=env,
                             timeout_seconds=timeout_seconds, max_memory_mb=max_memory_mb, version=version,
                             session_id=session_id, secrets=secrets, **extra)
        status, _, data = self._call("POST", "/api/sandbox/execute", body, timeout=self._run_timeout(body), result_errors=True)
        if status == 202:
            raise SandboxRunError(202, "the server queued an asynchronous job: use submit()")
        return Result.from_json(_json_object(data))

    def stream(
        self,
        language: str,
        code: Any,
        *,
        input_data: Union[str, bytes, None] = None,
        files: Optional[Mapping[str, Content]] = None,
        args: Optional[Sequence[str]] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout_seconds: Union[float, str, None] = None,
        max_memory_mb: Optional[int] = None,
        version: Optional[str] = None,
        session_id: Optional[str] = None,
        secrets: Optional[Sequence[str]] = None,
        **extra: Any,
    ) -> Stream:
        """Runs code with its output streamed (Server-Sent Events): returns a
        Stream, an iterator of Event that ends with the "result" event.
        Arguments as execute's. A refused request raises here already."""
        body = build_request(language, code, input_data=input_data, files=files, args=args, env=env,
                             timeout_seconds=timeout_seconds, max_memory_mb=max_memory_mb, version=version,
                             session_id=session_id, secrets=secrets, **extra)
        resp = self._open("POST", "/api/sandbox/execute", _encode(body), "application/json",
                          accept="text/event-stream", timeout=self._run_timeout(body))
        ctype = resp.headers.get("Content-Type", "")
        if resp.status != 200 or not ctype.startswith("text/event-stream"):
            try:
                data = resp.read()
            finally:
                resp.close()
            raise _api_error(resp.status, resp.headers, data)
        return Stream(resp)

    def submit(
        self,
        language: str,
        code: Any,
        *,
        input_data: Union[str, bytes, None] = None,
        files: Optional[Mapping[str, Content]] = None,
        args: Optional[Sequence[str]] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout_seconds: Union[float, str, None] = None,
        max_memory_mb: Optional[int] = None,
        version: Optional[str] = None,
        session_id: Optional[str] = None,
        secrets: Optional[Sequence[str]] = None,
        callback_url: Optional[str] = None,
        **extra: Any,
    ) -> Job:
        """Queues an asynchronous execution (POST /api/sandbox/executions)
        and returns at once with its Job (status "queued"). callback_url, if
        given, receives the result when it is over. Arguments as execute's."""
        body = build_request(language, code, input_data=input_data, files=files, args=args, env=env,
                             timeout_seconds=timeout_seconds, max_memory_mb=max_memory_mb, version=version,
                             session_id=session_id, secrets=secrets, callback_url=callback_url, **extra)
        _, _, data = self._call("POST", "/api/sandbox/executions", body)
        return Job.from_json(_json_object(data), client=self)

    def job(self, execution_id: str, wait: bool = False, timeout: Optional[float] = None) -> Union[Job, Result]:
        """An asynchronous execution: its Job while it is queued or running,
        its Result once it is over (GET /api/sandbox/executions/{id}). With
        wait=True the server holds the answer until the run is over or
        timeout seconds (at most its max_wait_seconds, 30 by default) pass."""
        path = "/api/sandbox/executions/" + _seg(execution_id)
        sock = self.timeout
        if wait:
            query = {"wait": "true"}
            if timeout is not None:
                query["timeout"] = "%g" % max(0.0, timeout)
            path += "?" + urllib.parse.urlencode(query)
            if sock is not None:
                sock += 30.0 if timeout is None else max(0.0, timeout)
        _, _, data = self._call("GET", path, timeout=sock)
        obj = _json_object(data)
        if obj.get("status") in ("queued", "running"):
            return Job.from_json(obj, client=self)
        return Result.from_json(obj)

    def wait(self, execution_id: str, timeout: Optional[float] = None) -> Result:
        """Waits for an asynchronous execution's Result. Raises TimeoutError
        when timeout seconds (None: no limit) pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = 30.0
            if deadline is not None:
                step = max(0.0, min(step, deadline - time.monotonic()))
            started = time.monotonic()
            got = self.job(execution_id, wait=True, timeout=step)
            if isinstance(got, Result):
                return got
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise TimeoutError("execution %s is still %s after %gs" % (execution_id, got.status, timeout))
            if now - started < 0.2:
                # The server did not hold the answer (max_wait_seconds 0?): poll.
                time.sleep(0.2 if deadline is None else max(0.0, min(0.2, deadline - now)))

    def call(
        self,
        language: str,
        code: Any,
        *,
        function: Optional[str] = None,
        params: Optional[Mapping[str, Any]] = None,
        class_name: Optional[str] = None,
        method_name: Optional[str] = None,
        method_params: Optional[Mapping[str, Any]] = None,
        **options: Any,
    ) -> Any:
        """Calls a function (or a class's method) of code (python,
        javascript) with keyword parameters and returns its return value,
        decoded from JSON. A call that raised or did not return raises
        CallError, with the exception and the result. Other options as
        execute's."""
        ep: Dict[str, Any] = {}
        if function is not None:
            ep["function"] = function
            ep["params"] = dict(params or {})
        if class_name is not None:
            ep["class_name"] = class_name
            ep["method_name"] = method_name or ""
            ep["method_params"] = dict(method_params or {})
        if not ep:
            raise TypeError("call needs function= or class_name= and method_name=")
        res = self.execute(language, code, entrypoint=ep, **options)
        if not res.has_return_value:
            raise CallError(res)
        return res.return_value

    # --- stored files ---

    def upload_file(
        self,
        name: Optional[str],
        content: Union[str, bytes, bytearray, memoryview, BinaryIO, Any],
        *,
        content_type: Optional[str] = None,
        ttl_seconds: Optional[float] = None,
    ) -> FileInfo:
        """Stores a file on the server (POST /api/sandbox/files) for
        executions to use (give the FileInfo as code or in files=): content
        is str (sent UTF-8), bytes or a file object (read in binary;
        streamed when its size is known)."""
        query: Dict[str, str] = {}
        if name:
            query["name"] = name
        if ttl_seconds is not None:
            query["ttl_seconds"] = "%g" % ttl_seconds
        path = "/api/sandbox/files" + ("?" + urllib.parse.urlencode(query) if query else "")
        headers: Dict[str, str] = {}
        body: Any
        if isinstance(content, str):
            body = content.encode("utf-8")
        elif isinstance(content, (bytes, bytearray, memoryview)):
            body = bytes(content)
        elif hasattr(content, "read"):
            body = _file_body(content, headers)
        else:
            raise TypeError("content must be str, bytes or a file object, not %s" % type(content).__name__)
        resp = self._open("POST", path, body, content_type or "application/octet-stream", headers=headers)
        with resp:
            data = resp.read()
        return FileInfo.from_json(_json_object(data))

    def file_info(self, file_id: str) -> FileInfo:
        """A stored file's metadata (GET /api/sandbox/files/{id})."""
        _, _, data = self._call("GET", "/api/sandbox/files/" + _seg(file_id))
        return FileInfo.from_json(_json_object(data))

    def list_files(self) -> List[FileInfo]:
        """The files stored by this client's key (GET /api/sandbox/files)."""
        _, _, data = self._call("GET", "/api/sandbox/files")
        return [FileInfo.from_json(x) for x in _json_object(data).get("files") or [] if isinstance(x, dict)]

    def file_content(self, file_id: str) -> bytes:
        """A stored file's content (GET /api/sandbox/files/{id}/content)."""
        _, _, data = self._call("GET", "/api/sandbox/files/" + _seg(file_id) + "/content", accept="*/*")
        return data

    def delete_file(self, file_id: str) -> None:
        """Removes a stored file (DELETE /api/sandbox/files/{id})."""
        self._call("DELETE", "/api/sandbox/files/" + _seg(file_id))

    # --- secrets ---

    def put_secret(
        self,
        name: str,
        value: str,
        hosts: Union[str, Sequence[str]],
        header: Union[SecretHeader, Mapping[str, str], Sequence[str], str, None] = None,
    ) -> Secret:
        """Stores a secret of this client's key, replacing one by that name
        (PUT /api/sandbox/secrets/{name}): a run naming it (execute(...,
        secrets=[name])) sees a placeholder in the environment variable
        name, and the server's egress sends value in its place to hosts
        only ("api.example.com", "*.example.com", optionally with ":PORT").
        header also sends it in a header: (name, format) with "{value}" in
        format ("Bearer {value}"), a dict {"name", "format"}, a
        SecretHeader, or a header's name alone (the value as it is). The
        answer, as every listing, never holds the value; neither does
        anything this client logs or shows."""
        body: Dict[str, Any] = {"value": value, "hosts": [hosts] if isinstance(hosts, str) else [str(h) for h in hosts]}
        if header is not None:
            body["header"] = _header_value(header)
        _, _, data = self._call("PUT", "/api/sandbox/secrets/" + _seg(name), body)
        return Secret.from_json(_json_object(data))

    def list_secrets(self) -> List[Secret]:
        """This client's key's secrets: names, hosts and headers, never
        values (GET /api/sandbox/secrets)."""
        _, _, data = self._call("GET", "/api/sandbox/secrets")
        return [Secret.from_json(x) for x in _json_object(data).get("secrets") or [] if isinstance(x, dict)]

    def delete_secret(self, name: str) -> None:
        """Deletes one of this client's key's secrets (DELETE
        /api/sandbox/secrets/{name}); SandboxRunError 404 when it has none
        by that name."""
        self._call("DELETE", "/api/sandbox/secrets/" + _seg(name))

    # --- sessions ---

    def create_session(
        self,
        language: str,
        interpreter: bool = False,
        *,
        image: Optional[str] = None,
        ttl_seconds: Optional[float] = None,
        network: Union[Sequence[str], Mapping[str, Any], None] = None,
        secrets: Optional[Sequence[str]] = None,
        timeout_seconds: Optional[float] = None,
        cpu_time_seconds: Optional[float] = None,
        max_memory_mb: Optional[int] = None,
        max_processes: Optional[int] = None,
        max_output_bytes: Optional[int] = None,
        compile_timeout_seconds: Optional[float] = None,
        **extra: Any,
    ) -> Session:
        """Starts a session (POST /api/sandbox/sessions): executions with its
        id share /work; with interpreter=True (python) they are cells of
        one live interpreter whose variables persist. The limits given are
        the defaults of its executions. secrets names secrets of the key the
        executions use without seeing them (an interpreter's for its whole
        life; each cell gets the values the store has as it starts); they
        need network with their hosts. Run code with Session.run."""
        body: Dict[str, Any] = {"language": language}
        if interpreter:
            body["interpreter"] = True
        for key, value in (("image", image), ("ttl_seconds", ttl_seconds), ("timeout_seconds", timeout_seconds),
                           ("cpu_time_seconds", cpu_time_seconds), ("max_memory_mb", max_memory_mb),
                           ("max_processes", max_processes), ("max_output_bytes", max_output_bytes),
                           ("compile_timeout_seconds", compile_timeout_seconds)):
            if value is not None:
                body[key] = value
        if network is not None:
            body["network"] = _network_value(network)
        if secrets is not None:
            body["secrets"] = [secrets] if isinstance(secrets, str) else [str(n) for n in secrets]
        body.update({k: v for k, v in extra.items() if v is not None})
        _, _, data = self._call("POST", "/api/sandbox/sessions", body)
        return Session.from_json(_json_object(data), client=self)

    def session(self, session_id: str) -> Session:
        """A session, with the files in its /work (GET /api/sandbox/sessions/{id})."""
        _, _, data = self._call("GET", "/api/sandbox/sessions/" + _seg(session_id))
        return Session.from_json(_json_object(data), client=self)

    def sessions(self) -> List[Session]:
        """This client's key's sessions (GET /api/sandbox/sessions)."""
        _, _, data = self._call("GET", "/api/sandbox/sessions")
        return [Session.from_json(x, client=self) for x in _json_object(data).get("sessions") or [] if isinstance(x, dict)]

    def delete_session(self, session_id: str) -> None:
        """Ends a session and removes its files (waits for a running execution of it)."""
        self._call("DELETE", "/api/sandbox/sessions/" + _seg(session_id))

    def session_file(self, session_id: str, path: str) -> bytes:
        """A file of a session's /work (path relative to /work)."""
        q = urllib.parse.urlencode({"path": path})
        _, _, data = self._call("GET", "/api/sandbox/sessions/" + _seg(session_id) + "/file?" + q, accept="*/*")
        return data

    def delete_session_file(self, session_id: str, path: str) -> None:
        """Removes a file from a session's /work."""
        q = urllib.parse.urlencode({"path": path})
        self._call("DELETE", "/api/sandbox/sessions/" + _seg(session_id) + "/file?" + q)

    # --- the server ---

    def languages(self) -> List[Language]:
        """The languages the server runs (GET /api/sandbox/languages)."""
        _, _, data = self._call("GET", "/api/sandbox/languages")
        out = json.loads(data) if data else []
        return [Language.from_json(x) for x in out if isinstance(x, dict)] if isinstance(out, list) else []

    def health(self) -> Dict[str, Any]:
        """Checks that the server answers (GET /healthz): {"status": "ok"}."""
        _, _, data = self._call("GET", "/healthz")
        return _json_object(data)

    def ready(self) -> Dict[str, Any]:
        """The server's readiness (GET /readyz): workers, in_flight, queued.
        A draining server raises SandboxRunError (503)."""
        _, _, data = self._call("GET", "/readyz")
        return _json_object(data)

    def openapi(self) -> Dict[str, Any]:
        """The server's OpenAPI document (GET /api/openapi.json)."""
        _, _, data = self._call("GET", "/api/openapi.json")
        return _json_object(data)

    # --- HTTP ---

    def _run_timeout(self, body: Mapping[str, Any]) -> Optional[float]:
        """The socket timeout of a call that runs body: the client's timeout
        plus the run's own limits (which the server enforces)."""
        if self.timeout is None:
            return None
        run = _number(body.get("timeout_seconds"))
        if body.get("timeout_seconds") == "auto":
            run = 300.0
        cases = body.get("test_cases")
        if isinstance(cases, list) and cases:
            run *= len(cases)
        return self.timeout + run + _number(body.get("compile_timeout_seconds"))

    def _call(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        timeout: Any = _UNSET,
        accept: str = "application/json",
        result_errors: bool = False,
    ) -> tuple:
        """Sends payload (JSON, if not None) and returns the 2xx answer's
        status, headers and body."""
        body, ctype = (None, None) if payload is None else (_encode(payload), "application/json")
        resp = self._open(method, path, body, ctype, accept=accept, timeout=timeout, result_errors=result_errors)
        with resp:
            data = resp.read()
        return resp.status, resp.headers, data

    def _open(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: Optional[str],
        *,
        accept: str = "application/json",
        timeout: Any = _UNSET,
        headers: Optional[Mapping[str, str]] = None,
        result_errors: bool = False,
    ) -> Any:
        req = urllib.request.Request(self.base_url + path, data=body, method=method)
        req.add_header("Accept", accept)
        req.add_header("User-Agent", _USER_AGENT)
        if content_type:
            req.add_header("Content-Type", content_type)
        if self.api_key:
            req.add_header("Authorization", "Bearer " + self.api_key)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        t = self.timeout if timeout is _UNSET else timeout
        try:
            if t is None:
                return self._opener.open(req)
            return self._opener.open(req, timeout=t)
        except urllib.error.HTTPError as e:
            try:
                data = e.read()
            except Exception:
                data = b""
            finally:
                e.close()
            raise _api_error(e.code, e.headers, data, result_errors) from None


def _header_value(header: Any) -> Dict[str, str]:
    """A secret's header as the API takes it: {"name", "format"}."""
    if isinstance(header, SecretHeader):
        return header.to_json()
    if isinstance(header, str):
        return {"name": header}
    if isinstance(header, Mapping):
        return {str(k): str(v) for k, v in header.items() if v is not None}
    parts = list(header)
    if not 1 <= len(parts) <= 2:
        raise TypeError("header must be (name, format), a dict, a SecretHeader or a name, not %d items" % len(parts))
    return SecretHeader(*[str(p) for p in parts]).to_json()


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _encode(payload: Any) -> bytes:
    # Strict UTF-8: a str with lone surrogates is an error here rather than
    # something else on the server (bytes travel base64).
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _json_object(data: bytes) -> Dict[str, Any]:
    if not data:
        return {}
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("the server answered JSON that is not an object: %.100r" % data)
    return obj


def _file_body(f: Any, headers: Dict[str, str]) -> Any:
    """A file object as an upload's body: streamed with its Content-Length
    when its size can be known, read whole otherwise."""
    if isinstance(f, io.TextIOBase):
        return f.read().encode("utf-8")
    try:
        size = os.fstat(f.fileno()).st_size - f.tell()
        if size >= 0:
            headers["Content-Length"] = str(size)
            return f
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass
    data = f.read()
    if isinstance(data, str):
        data = data.encode("utf-8")
    return bytes(data)


def _api_error(status: int, headers: Any, data: bytes, result_errors: bool = False) -> SandboxRunError:
    """An answer other than 2xx as SandboxRunError: {"error", "execution_id"}
    when it is JSON, else the body's text, else the status text."""
    retry = parse_retry_after(headers.get("Retry-After") if headers is not None else None)
    obj: Any = None
    try:
        obj = json.loads(data) if data else None
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        result = None
        if result_errors and status == 500 and obj.get("status") and obj.get("execution_id"):
            result = Result.from_json(obj)  # status error_setup: the sandbox failed
        msg = obj.get("error")
        if isinstance(msg, str) and msg:
            return SandboxRunError(status, msg, retry, obj.get("execution_id") or None, result)
        if result is not None:
            return SandboxRunError(status, result.status, retry, result.execution_id, result)
    text = data.decode("utf-8", "replace").strip()
    if len(text) > 512:
        text = text[:512] + "..."
    if not text:
        try:
            from http import HTTPStatus

            text = HTTPStatus(status).phrase
        except ValueError:
            text = ""
    return SandboxRunError(status, text, retry)
