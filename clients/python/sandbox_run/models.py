"""Typed forms of what the sandbox-run API answers (pkg/wire on the server).

Every class has a ``from_json`` that reads the API's JSON object; fields the
server leaves out get their defaults, and the objects that carry a ``raw``
field keep the whole JSON object they were read from, so fields this version
of the client does not know are still there.

Output that is not UTF-8 text travels base64 (``stdout_encoding`` is then
``"base64"``): ``stdout`` is always ``str`` (undecodable bytes replaced by
U+FFFD) and ``stdout_bytes`` always the exact bytes the program wrote.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client, Stream

__all__ = [
    "BatchSummary",
    "CallbackStatus",
    "CaseResult",
    "Destination",
    "Event",
    "ExceptionInfo",
    "FileInfo",
    "HTTPRequest",
    "Job",
    "Language",
    "LanguageVersion",
    "Limits",
    "NetworkReport",
    "Result",
    "Secret",
    "SecretHeader",
    "Session",
    "SessionFile",
    "SkippedFile",
    "StepResult",
    "TestCase",
]


# --- decoding helpers -------------------------------------------------------

_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:?\d{2})?$"
)


def parse_time(value: Any) -> Optional[datetime]:
    """An RFC 3339 time as the server writes it (nanoseconds, "Z") as an
    aware datetime; None when absent, unreadable or Go's zero time."""
    if not isinstance(value, str):
        return None
    m = _TIME.match(value.strip())
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if year <= 1:
        return None  # Go's zero time: "not yet"
    micro = int(((m.group(7) or "") + "000000")[:6])
    tz = timezone.utc
    off = m.group(8)
    if off and off not in ("Z", "z"):
        sign = -1 if off[0] == "-" else 1
        digits = off[1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError:
        return None


def _b64decode(s: str) -> bytes:
    try:
        return base64.b64decode(s or "")
    except (binascii.Error, ValueError):
        return (s or "").encode("utf-8", "surrogatepass")


def _str(d: Mapping[str, Any], key: str) -> str:
    v = d.get(key)
    return v if isinstance(v, str) else ""


def _int(d: Mapping[str, Any], key: str) -> int:
    v = d.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _float(d: Mapping[str, Any], key: str) -> float:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _opt_float(d: Mapping[str, Any], key: str) -> Optional[float]:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _opt_int(d: Mapping[str, Any], key: str) -> Optional[int]:
    v = d.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _bool(d: Mapping[str, Any], key: str) -> bool:
    return d.get(key) is True


def _list(d: Mapping[str, Any], key: str) -> List[Any]:
    v = d.get(key)
    return v if isinstance(v, list) else []


def _dict(d: Mapping[str, Any], key: str) -> Optional[Dict[str, Any]]:
    v = d.get(key)
    return v if isinstance(v, dict) else None


# How a field of each of these types is read from the key of its name.
_READERS = {
    "str": _str,
    "int": _int,
    "float": _float,
    "bool": _bool,
    "Optional[int]": _opt_int,
    "Optional[float]": _opt_float,
    "Optional[datetime]": lambda d, key: parse_time(d.get(key)),
}


def _read(cls: Any, d: Mapping[str, Any], **given: Any) -> Any:
    """An instance of the dataclass cls from the JSON object d: every field
    of a type _READERS knows is read from the key of its name (absent or
    mistyped, it gets its zero), the others (nested objects, lists, raw)
    come from given, or keep their defaults."""
    kw = {
        f.name: _READERS[f.type](d, f.name)
        for f in fields(cls)
        if f.name not in given and not f.name.startswith("_") and f.type in _READERS
    }
    return cls(**kw, **given)


def decode_output(value: Any, encoding: Any) -> bytes:
    """The bytes of an output as it travels: text, or base64 when encoding says so."""
    s = value if isinstance(value, str) else ""
    if encoding == "base64":
        return _b64decode(s)
    return s.encode("utf-8", "surrogatepass")


def decode_output_files(obj: Any) -> Dict[str, Union[str, bytes]]:
    """output_files as a dict: text files as str, the others (that travel as
    {"content": ..., "encoding": "base64"}) as bytes. A path that is not
    UTF-8 (sent with "path_encoding": "base64") becomes a str with its bad
    bytes as surrogate escapes, as os.fsdecode makes them on POSIX."""
    out: Dict[str, Union[str, bytes]] = {}
    if not isinstance(obj, dict):
        return out
    for key, value in obj.items():
        name = key
        if isinstance(value, str):
            out[name] = value
            continue
        if not isinstance(value, dict):
            continue
        content = value.get("content") if isinstance(value.get("content"), str) else ""
        if str(value.get("encoding") or "").lower() == "base64":
            data: Union[str, bytes] = _b64decode(content)
        else:
            data = content
        if value.get("path_encoding") == "base64" and isinstance(value.get("path"), str):
            name = _b64decode(value["path"]).decode("utf-8", "surrogateescape")
        out[name] = data
    return out


# --- results ------------------------------------------------------------------


@dataclass
class Outcome:
    """What one sandboxed step did (the run, the compile, a test case)."""

    status: str = ""
    """completed, error_runtime, timeout, error_compile or error_setup."""
    stdout: str = ""
    stderr: str = ""
    stdout_encoding: Optional[str] = None
    """"base64" when stdout was not UTF-8 text (stdout_bytes has it exactly)."""
    stderr_encoding: Optional[str] = None
    exit_code: int = 0
    signal: str = ""
    limit_reason: str = ""
    duration_ms: float = 0.0
    cpu_time_ms: float = 0.0
    memory_used_mb: float = 0.0
    _stdout_b: Optional[bytes] = field(default=None, repr=False, compare=False)
    _stderr_b: Optional[bytes] = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """The step completed (ran and exited 0)."""
        return self.status == "completed"

    @property
    def stdout_bytes(self) -> bytes:
        """stdout exactly as the program wrote it."""
        if self._stdout_b is not None:
            return self._stdout_b
        return self.stdout.encode("utf-8", "surrogatepass")

    @property
    def stderr_bytes(self) -> bytes:
        """stderr exactly as the program wrote it."""
        if self._stderr_b is not None:
            return self._stderr_b
        return self.stderr.encode("utf-8", "surrogatepass")

    @staticmethod
    def _outcome_kwargs(d: Mapping[str, Any]) -> Dict[str, Any]:
        """The fields _read cannot: stdout and stderr, decoded as their
        encodings say."""
        kw: Dict[str, Any] = {
            "stdout_encoding": d.get("stdout_encoding") or None,
            "stderr_encoding": d.get("stderr_encoding") or None,
        }
        for name in ("stdout", "stderr"):
            value, enc = d.get(name), d.get(name + "_encoding")
            if enc == "base64":
                raw = decode_output(value, enc)
                kw[name] = raw.decode("utf-8", "replace")
                kw["_" + name + "_b"] = raw
            else:
                kw[name] = value if isinstance(value, str) else ""
        return kw


@dataclass
class StepResult(Outcome):
    """The compile step's own outcome (Result.compile)."""

    cache_hit: bool = False
    """No compiler ran: the artefacts came from an identical compile."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "StepResult":
        return _read(cls, d, **cls._outcome_kwargs(d))


@dataclass
class CaseResult(Outcome):
    """The outcome of one test case of a batch (Result.test_cases)."""

    index: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    verdict: str = ""
    """accepted or wrong_answer when the case had an expected output and
    completed; else the failure (error_runtime, timeout, ...) or ""."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CaseResult":
        return _read(cls, d, **cls._outcome_kwargs(d))


@dataclass
class BatchSummary:
    """The verdicts of a test-case batch, counted."""

    total: int = 0
    accepted: int = 0
    failed: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "BatchSummary":
        return _read(cls, d)


@dataclass
class SkippedFile:
    """An output file that was not returned, and why."""

    path: str = ""
    reason: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SkippedFile":
        return _read(cls, d)


@dataclass
class ExceptionInfo:
    """What an entry point or an interpreter cell raised."""

    type: str = ""
    message: str = ""
    traceback: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ExceptionInfo":
        return _read(cls, d)


@dataclass
class Destination:
    """One destination a run with network access tried to reach."""

    host: str = ""
    ip: str = ""
    port: int = 0
    protocol: str = ""
    allowed: bool = False
    reason: str = ""
    error: str = ""
    connections: int = 0
    bytes_out: int = 0
    bytes_in: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Destination":
        return _read(cls, d)


@dataclass
class HTTPRequest:
    """One HTTP or HTTPS request of a run whose egress carried its requests
    (a run with secrets): NetworkReport.requests."""

    scheme: str = ""
    host: str = ""
    """The host the request named (its Host header)."""
    method: str = ""
    path: str = ""
    """The request's path and query as the program sent them: placeholders,
    never secrets."""
    status: int = 0
    """The response's status (0: none came)."""
    bytes_out: int = 0
    bytes_in: int = 0
    secrets: List[str] = field(default_factory=list)
    """The secrets put in place of their placeholders in this request."""
    error: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "HTTPRequest":
        return _read(cls, d, secrets=[str(x) for x in _list(d, "secrets")])


@dataclass
class NetworkReport:
    """What a run's network access did (Result.network)."""

    destinations: List[Destination] = field(default_factory=list)
    allowed: int = 0
    denied: int = 0
    bytes_out: int = 0
    bytes_in: int = 0
    limit: str = ""
    dropped: int = 0
    requests: List[HTTPRequest] = field(default_factory=list)
    """The run's HTTP and HTTPS requests, when its egress carried them (a
    run with secrets)."""
    requests_dropped: int = 0
    """Requests left out of requests past its cap."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "NetworkReport":
        return _read(
            cls,
            d,
            destinations=[Destination.from_json(x) for x in _list(d, "destinations") if isinstance(x, dict)],
            requests=[HTTPRequest.from_json(x) for x in _list(d, "requests") if isinstance(x, dict)],
        )


@dataclass
class CallbackStatus:
    """The delivery state of an async execution's callback."""

    status: str = ""
    """pending, delivered or failed."""
    attempts: int = 0
    last_http_status: Optional[int] = None
    error: str = ""
    last_attempt_at: Optional[datetime] = None
    next_attempt_at: Optional[datetime] = None
    delivered_at: Optional[datetime] = None
    failed_at: Optional[datetime] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CallbackStatus":
        return _read(cls, d)


@dataclass
class Result(Outcome):
    """The outcome of an execution: POST /api/sandbox/execute's answer, a
    stream's last event, an async job's result or an interpreter cell's."""

    execution_id: str = ""
    language: str = ""
    version: str = ""
    image: str = ""
    image_digest: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    output_files: Dict[str, Union[str, bytes]] = field(default_factory=dict)
    """Files the program created or changed in /work: text as str, the
    others as bytes."""
    skipped_files: List[SkippedFile] = field(default_factory=list)
    compile: Optional[StepResult] = None
    test_cases: List[CaseResult] = field(default_factory=list)
    summary: Optional[BatchSummary] = None
    error: str = ""
    """Why the sandbox could not be set up, or why a call gave no value."""
    return_value: Any = None
    """An entry point's return value, decoded from JSON (see has_return_value)."""
    has_return_value: bool = False
    """The entry point returned (return_value may then be None: it returned None)."""
    exception: Optional[ExceptionInfo] = None
    result: Optional[Dict[str, str]] = None
    """An interpreter cell's last expression's value by MIME type
    ("text/plain" always); None when the cell had no value."""
    display: List[Dict[str, str]] = field(default_factory=list)
    """What an interpreter cell displayed, each by MIME type."""
    restarted: bool = False
    network: Optional[NetworkReport] = None
    auto_timeout_seconds: Optional[float] = None
    response_truncated: bool = False
    created_at: Optional[datetime] = None
    """Async executions: when it was submitted (also started_at, finished_at)."""
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    callback: Optional[CallbackStatus] = None
    result_truncated: bool = False
    result_truncated_reason: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The JSON object as the server sent it."""

    @property
    def done(self) -> bool:
        """Always True: a result is an execution that is over (see Job)."""
        return True

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Result":
        compile_ = _dict(d, "compile")
        summary = _dict(d, "summary")
        exc = _dict(d, "exception")
        net = _dict(d, "network")
        cb = _dict(d, "callback")
        value = _dict(d, "result")
        return _read(
            cls,
            d,
            output_files=decode_output_files(d.get("output_files")),
            skipped_files=[SkippedFile.from_json(x) for x in _list(d, "skipped_files") if isinstance(x, dict)],
            compile=StepResult.from_json(compile_) if compile_ is not None else None,
            test_cases=[CaseResult.from_json(x) for x in _list(d, "test_cases") if isinstance(x, dict)],
            summary=BatchSummary.from_json(summary) if summary is not None else None,
            return_value=d.get("return_value"),
            has_return_value="return_value" in d,
            exception=ExceptionInfo.from_json(exc) if exc is not None else None,
            result={str(k): v for k, v in value.items()} if value is not None else None,
            display=[x for x in _list(d, "display") if isinstance(x, dict)],
            network=NetworkReport.from_json(net) if net is not None else None,
            callback=CallbackStatus.from_json(cb) if cb is not None else None,
            raw=dict(d),
            **cls._outcome_kwargs(d),
        )


@dataclass
class Event:
    """One event of a streamed execution (Client.stream).

    type is "stdout", "stderr" or "compile" for a chunk of output, whose
    data is str when the chunk is UTF-8 text and bytes otherwise; offset
    counts the bytes of that stream before the chunk. The last event has
    type "result" and carries the execution's Result in .result.
    """

    type: str
    data: Union[str, bytes] = ""
    offset: int = 0
    encoding: Optional[str] = None
    result: Optional[Result] = None

    @property
    def data_bytes(self) -> bytes:
        """The chunk as the program wrote it."""
        if isinstance(self.data, bytes):
            return self.data
        return self.data.encode("utf-8", "surrogatepass")

    @property
    def text(self) -> str:
        """The chunk as text (bytes that are not UTF-8 replaced by U+FFFD)."""
        if isinstance(self.data, bytes):
            return self.data.decode("utf-8", "replace")
        return self.data

    @classmethod
    def from_json(cls, d: Mapping[str, Any], type: Optional[str] = None) -> "Event":
        enc = d.get("encoding") or None
        data: Union[str, bytes] = _str(d, "data")
        if enc == "base64":
            data = _b64decode(data)  # type: ignore[arg-type]
        return cls(type=type or _str(d, "type"), data=data, offset=_int(d, "offset"), encoding=enc)


# --- async jobs -----------------------------------------------------------------


@dataclass
class Job:
    """An asynchronous execution that is not over (queued or running);
    Client.job answers a Result once it is."""

    execution_id: str = ""
    status: str = ""
    """queued or running."""
    created_at: Optional[datetime] = None
    started_at: Optional[datetime] = None
    queue_position: Optional[int] = None
    """1 is next."""
    callback: Optional[CallbackStatus] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _client: Optional["Client"] = field(default=None, repr=False, compare=False)

    @property
    def done(self) -> bool:
        """Always False: a job that is over is a Result."""
        return False

    def refresh(self, wait: bool = False, timeout: Optional[float] = None) -> Union["Job", Result]:
        """The job's state now (Client.job)."""
        return self._need_client().job(self.execution_id, wait=wait, timeout=timeout)

    def wait(self, timeout: Optional[float] = None) -> Result:
        """Waits for the result (Client.wait)."""
        return self._need_client().wait(self.execution_id, timeout=timeout)

    def _need_client(self) -> "Client":
        if self._client is None:
            raise RuntimeError("this Job was not made by a Client")
        return self._client

    @classmethod
    def from_json(cls, d: Mapping[str, Any], client: Optional["Client"] = None) -> "Job":
        cb = _dict(d, "callback")
        return _read(
            cls,
            d,
            callback=CallbackStatus.from_json(cb) if cb is not None else None,
            raw=dict(d),
            _client=client,
        )


# --- stored files -----------------------------------------------------------------


@dataclass
class FileInfo:
    """A file stored on the server (Client.upload_file). Give it as code or
    as a file's content to execute: it travels as {"file_id": ...}."""

    file_id: str = ""
    name: str = ""
    content_type: str = ""
    size: int = 0
    sha256: str = ""
    created_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ref(self) -> Dict[str, str]:
        """The reference executions take in place of content."""
        return {"file_id": self.file_id}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileInfo":
        return _read(cls, d, raw=dict(d))


# --- secrets -------------------------------------------------------------------------


@dataclass
class SecretHeader:
    """A header a secret is also sent in: name set to format with
    "{value}" replaced ("Bearer {value}"; "" : the value alone)."""

    name: str = ""
    format: str = ""

    def to_json(self) -> Dict[str, str]:
        out = {"name": self.name}
        if self.format:
            out["format"] = self.format
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SecretHeader":
        return _read(cls, d)


@dataclass
class Secret:
    """A secret of this client's key as the server lists it
    (Client.put_secret, Client.list_secrets): its name, the hosts its value
    may be sent to and the header it goes in, never the value itself. A run
    naming it (execute(..., secrets=[name])) sees a placeholder in the
    environment variable of its name; the server's egress puts the value in
    its place in the run's HTTP and HTTPS requests to those hosts."""

    name: str = ""
    hosts: List[str] = field(default_factory=list)
    header: Optional[SecretHeader] = None
    created: Optional[datetime] = None
    updated: Optional[datetime] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Secret":
        header = _dict(d, "header")
        return _read(
            cls,
            d,
            hosts=[str(x) for x in _list(d, "hosts")],
            header=SecretHeader.from_json(header) if header is not None else None,
            raw=dict(d),
        )


# --- sessions ------------------------------------------------------------------------


@dataclass
class SessionFile:
    """A regular file a session keeps in /work."""

    path: str = ""
    size: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SessionFile":
        return _read(cls, d)


@dataclass
class Session:
    """A session: executions that share /work, or, with interpreter=True, the
    cells of one live interpreter (python) whose variables persist.

    Made by Client.create_session or Client.session; run() executes in it.
    Used as a context manager, the session is deleted at the end of the block.
    """

    session_id: str = ""
    language: str = ""
    interpreter: bool = False
    image: str = ""
    ttl_seconds: float = 0.0
    created_at: Optional[datetime] = None
    last_used_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    max_bytes: int = 0
    timeout_seconds: Optional[float] = None
    cpu_time_seconds: Optional[float] = None
    max_memory_mb: Optional[int] = None
    max_processes: Optional[int] = None
    max_output_bytes: Optional[int] = None
    compile_timeout_seconds: Optional[float] = None
    network: Optional[List[str]] = None
    """The destinations its executions may reach (network.allow)."""
    secrets: Optional[List[str]] = None
    """The names of the secrets its executions use."""
    bytes_used: Optional[int] = None
    """Only from Client.session (GET of one session)."""
    files: List[SessionFile] = field(default_factory=list)
    """Only from Client.session (GET of one session)."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _client: Optional["Client"] = field(default=None, repr=False, compare=False)

    def run(self, code: Any, **options: Any) -> Result:
        """Runs code in the session (a cell of an interpreter session):
        Client.execute with the session's language and session_id."""
        return self._need_client().execute(self.language, code, session_id=self.session_id, **options)

    def stream(self, code: Any, **options: Any) -> "Stream":
        """Client.stream in the session."""
        return self._need_client().stream(self.language, code, session_id=self.session_id, **options)

    def submit(self, code: Any, **options: Any) -> Job:
        """Client.submit in the session."""
        return self._need_client().submit(self.language, code, session_id=self.session_id, **options)

    def read_file(self, path: str) -> bytes:
        """A file of the session's /work (path relative to it)."""
        return self._need_client().session_file(self.session_id, path)

    def delete_file(self, path: str) -> None:
        """Removes a file from the session's /work."""
        self._need_client().delete_session_file(self.session_id, path)

    def refresh(self) -> "Session":
        """The session as the server has it now, with its files."""
        return self._need_client().session(self.session_id)

    def delete(self) -> None:
        """Ends the session and removes its files."""
        self._need_client().delete_session(self.session_id)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        from .errors import SandboxRunError

        try:
            self.delete()
        except SandboxRunError as e:
            if e.status != 404:
                raise

    def _need_client(self) -> "Client":
        if self._client is None:
            raise RuntimeError("this Session was not made by a Client")
        return self._client

    @classmethod
    def from_json(cls, d: Mapping[str, Any], client: Optional["Client"] = None) -> "Session":
        net = _dict(d, "network")
        allow = net.get("allow") if net is not None else None
        return _read(
            cls,
            d,
            network=[str(x) for x in allow] if isinstance(allow, list) else None,
            secrets=[str(x) for x in _list(d, "secrets")] or None,
            files=[SessionFile.from_json(x) for x in _list(d, "files") if isinstance(x, dict)],
            raw=dict(d),
            _client=client,
        )


# --- languages --------------------------------------------------------------------


@dataclass
class Limits:
    """A set of execution limits in the API's units."""

    timeout_seconds: float = 0.0
    cpu_time_seconds: float = 0.0
    memory_mb: int = 0
    processes: int = 0
    output_bytes: int = 0
    file_size_bytes: int = 0
    compile_timeout_seconds: float = 0.0

    @classmethod
    def from_json(cls, d: Optional[Mapping[str, Any]]) -> "Limits":
        return _read(cls, d or {})


@dataclass
class LanguageVersion:
    """One installed version of a language."""

    version: str = ""
    available: bool = False
    default: bool = False
    compiled: bool = False
    default_limits: Limits = field(default_factory=Limits)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LanguageVersion":
        return _read(cls, d, default_limits=Limits.from_json(_dict(d, "default_limits")))


@dataclass
class Language:
    """A language the server runs (Client.languages). The top-level fields
    describe its default version."""

    name: str = ""
    aliases: List[str] = field(default_factory=list)
    extensions: List[str] = field(default_factory=list)
    version: str = ""
    compiled: bool = False
    default_limits: Limits = field(default_factory=Limits)
    versions: List[LanguageVersion] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Language":
        return _read(
            cls,
            d,
            aliases=[str(x) for x in _list(d, "aliases")],
            extensions=[str(x) for x in _list(d, "extensions")],
            default_limits=Limits.from_json(_dict(d, "default_limits")),
            versions=[LanguageVersion.from_json(x) for x in _list(d, "versions") if isinstance(x, dict)],
            raw=dict(d),
        )


# --- requests ------------------------------------------------------------------------


@dataclass
class TestCase:
    """One input of a test-case batch (execute(..., test_cases=[...])) and,
    optionally, what it should print."""

    __test__ = False  # not a unittest/pytest test class

    input_data: str = ""
    expected_output: Optional[str] = None
    args: Optional[List[str]] = None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if self.input_data:
            out["input_data"] = self.input_data
        if self.expected_output is not None:
            out["expected_output"] = self.expected_output
        if self.args is not None:
            out["args"] = list(self.args)
        return out
