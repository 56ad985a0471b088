"""Live sandboxes (/api/sandbox/sandboxes): sandboxes that stay up between
calls, with processes, files and a terminal, until they are killed or their
timeout passes.

    from sandbox_run import Client, Sandbox

    client = Client("http://127.0.0.1:8080")
    with Sandbox.create(client, languages=["python"]) as sbx:
        sbx.files.write("data.txt", "41\\n")
        result = sbx.exec("python3 -c 'print(int(open(\\"data.txt\\").read()) + 1)'")
        print(result.stdout)  # 42

Paths in a sandbox are relative to its home, /work, unless absolute. A
sandbox that does not exist (or is another key's, or has ended) raises
SandboxRunError with status 404.
"""

from __future__ import annotations

import base64
import codecs
import json
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, BinaryIO, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .client import Client, Stream, _encode, _file_body, _json_object, _seg
from .errors import SandboxRunError
from .models import _list, _read, _str

__all__ = ["FileEntry", "Files", "ProcessInfo", "ProcessResult", "Sandbox"]

_BASE = "/api/sandbox/sandboxes"

Command = Union[str, Sequence[str]]
OnOutput = Optional[Callable[[str], Any]]


@dataclass
class ProcessResult:
    """A process that ended: its exit code (-1, with status "signal: ...",
    when a signal killed it; None when the sandbox ended first, with error
    saying so), its output as text, and whether its timeout killed it."""

    pid: int = 0
    exit_code: Optional[int] = None
    status: str = ""
    """How it ended: "exit status 3", "signal: killed"."""
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """It exited with 0."""
        return self.exit_code == 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ProcessResult":
        return _read(cls, d, raw=dict(d))


@dataclass
class ProcessInfo:
    """A process running in a sandbox (Sandbox.processes)."""

    pid: int = 0
    args: List[str] = field(default_factory=list)
    cwd: str = ""
    tag: str = ""
    pty: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ProcessInfo":
        return _read(cls, d, args=[a for a in _list(d, "args") if isinstance(a, str)])


@dataclass
class FileEntry:
    """A file, directory or symlink in a sandbox."""

    name: str = ""
    path: str = ""
    """Its absolute path."""
    type: str = ""
    """file, dir or symlink."""
    size: int = 0
    mode: str = ""
    """As ls shows it: -rw-r--r--."""
    mod_time: Optional[datetime] = None
    target: str = ""
    """A symlink's target."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileEntry":
        return _read(cls, d)


class Files:
    """The files of a sandbox (Sandbox.files)."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sbx = sandbox

    def _path(self, suffix: str, **query: Any) -> str:
        q = urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        return self._sbx._path("/files" + suffix) + ("?" + q if q else "")

    def read(self, path: str) -> bytes:
        """The file's bytes."""
        _, _, data = self._sbx._client._call("GET", self._path("", path=path), accept="*/*")
        return data

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The file as text."""
        return self.read(path).decode(encoding)

    def write(self, path: str, content: Union[str, bytes, bytearray, memoryview, BinaryIO, Any]) -> FileEntry:
        """Writes the file (its directories are made; one that is there is
        replaced): content is str (written UTF-8), bytes or a binary file
        object (streamed when its size can be known). At most 64 MiB."""
        headers: Dict[str, str] = {}
        if isinstance(content, str):
            body: Any = content.encode("utf-8")
        elif isinstance(content, (bytes, bytearray, memoryview)):
            body = bytes(content)
        elif hasattr(content, "read"):
            body = _file_body(content, headers)
        else:
            raise TypeError("content must be str, bytes or a file object, not %s" % type(content).__name__)
        resp = self._sbx._client._open("PUT", self._path("", path=path), body, "application/octet-stream", headers=headers)
        with resp:
            data = resp.read()
        return FileEntry.from_json(_json_object(data))

    def list(self, path: str = "", depth: int = 1) -> List[FileEntry]:
        """A directory's entries ("" is /work), to depth levels below it."""
        _, _, data = self._sbx._client._call("GET", self._path("/list", path=path or None, depth=depth if depth != 1 else None))
        return [FileEntry.from_json(e) for e in _json_object(data).get("entries") or [] if isinstance(e, dict)]

    def stat(self, path: str) -> FileEntry:
        """The file, directory or symlink at path."""
        _, _, data = self._sbx._client._call("GET", self._path("/stat", path=path))
        return FileEntry.from_json(_json_object(data))

    def exists(self, path: str) -> bool:
        """Whether something is at path."""
        try:
            self.stat(path)
        except SandboxRunError as e:
            if e.status == 404:
                return False
            raise
        return True

    def mkdir(self, path: str) -> FileEntry:
        """Makes a directory, with its parents."""
        _, _, data = self._sbx._client._call("POST", self._sbx._path("/files/mkdir"), {"path": path})
        return FileEntry.from_json(_json_object(data))

    def move(self, src: str, dst: str) -> FileEntry:
        """Renames a file or directory; returns it where it is now."""
        _, _, data = self._sbx._client._call("POST", self._sbx._path("/files/move"), {"from": src, "to": dst})
        return FileEntry.from_json(_json_object(data))

    def remove(self, path: str) -> None:
        """Removes a file, or a directory with all it holds."""
        self._sbx._client._call("DELETE", self._path("", path=path))


def _process_body(
    command: Command,
    cwd: Optional[str],
    env: Optional[Mapping[str, str]],
    timeout: Optional[float],
    pty: Optional[Tuple[int, int]] = None,
    **extra: Any,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if isinstance(command, str):
        body["command"] = command
    else:
        body["args"] = [str(a) for a in command]
        if not body["args"]:
            raise ValueError("the command is empty")
    if cwd is not None:
        body["cwd"] = cwd
    if env:
        body["env"] = dict(env)
    if timeout is not None:
        body["timeout_seconds"] = timeout
    if pty is not None:
        body["pty"] = {"cols": int(pty[0]), "rows": int(pty[1])}
    body.update({k: v for k, v in extra.items() if v is not None and v is not False})
    return body


def _network(allow: Sequence[str], budgets: Optional[Mapping[str, int]]) -> Dict[str, Any]:
    """A network request's JSON: {"allow": [...], "budgets": {...}}."""
    body: Dict[str, Any] = {"allow": [allow] if isinstance(allow, str) else [str(a) for a in allow]}
    if budgets:
        body["budgets"] = {str(k): int(v) for k, v in budgets.items()}
    return body


def _budgets(v: Any) -> Dict[str, int]:
    """network_budgets as the API gives it: {entry: bytes}."""
    if not isinstance(v, dict):
        return {}
    return {k: int(n) for k, n in v.items() if isinstance(k, str) and isinstance(n, (int, float)) and not isinstance(n, bool)}


@dataclass
class Sandbox:
    """A live sandbox: made by Sandbox.create, found by Sandbox.get or
    Sandbox.list. Used as a context manager it is killed at the end of the
    block."""

    id: str = ""
    template: str = ""
    languages: List[str] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)
    memory_mb: int = 0
    started_at: Optional[datetime] = None
    end_at: Optional[datetime] = None
    """When its timeout ends it."""
    state: str = ""
    """running, or paused (pause())."""
    auto_pause: bool = False
    network: List[str] = field(default_factory=list)
    """What its network may reach (empty: nothing; set_network() changes it)."""
    network_budgets: Dict[str, int] = field(default_factory=dict)
    """The bytes its network may move by entry of network (empty: no bound)."""
    secrets: List[str] = field(default_factory=list)
    """The names of the secrets its processes use (placeholders in their environment)."""
    image: str = ""
    """The OCI image its root is ("": the host's toolchains)."""
    isolation: str = ""
    """Its wall: native, or gvisor (its forks carry its memory)."""
    forked_memory: bool = False
    """It was forked with its parent's memory and running processes."""
    idle_pause_seconds: float = 0
    """It is paused once nobody has used it for that long (0: never)."""
    evicted: bool = False
    """Paused and written to disk, its memory given back (pause(evict=True)); any call brings it back."""
    access_token: str = ""
    """Only from Sandbox.create."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _client: Optional[Client] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any], client: Optional[Client] = None) -> "Sandbox":
        meta = d.get("metadata")
        return _read(
            cls,
            d,
            languages=[x for x in _list(d, "languages") if isinstance(x, str)],
            network=[x for x in _list(d, "network") if isinstance(x, str)],
            network_budgets=_budgets(d.get("network_budgets")),
            secrets=[x for x in _list(d, "secrets") if isinstance(x, str)],
            metadata=dict(meta) if isinstance(meta, dict) else {},
            raw=dict(d),
            _client=client,
        )

    # --- the sandboxes ---

    @classmethod
    def create(
        cls,
        client: Client,
        languages: Optional[Sequence[str]] = None,
        *,
        template: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        metadata: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        memory_mb: Optional[int] = None,
        network_allow: Optional[Sequence[str]] = None,
        network_budgets: Optional[Mapping[str, int]] = None,
        secrets: Optional[Sequence[str]] = None,
        image: Optional[str] = None,
        auto_pause: bool = False,
        snapshot: Optional[str] = None,
        isolation: Optional[str] = None,
        idle_pause: Optional[float] = None,
    ) -> "Sandbox":
        """Creates a live sandbox (POST /api/sandbox/sandboxes) with the
        toolchains of languages (default: the server's, python, javascript
        and bash), env in every process's environment, living timeout
        seconds (default: the server's live.default_timeout_seconds), a
        network that reaches what network_allow lists (default: none; within
        the server's network.allow), and image's root filesystem for its own
        (an OCI image the server's images.allow allows). With auto_pause its
        timeout pauses it instead of ending it; with snapshot it starts with
        that snapshot's files (snapshot()). isolation is its wall, native or
        gvisor (whose forks carry the sandbox's memory and running
        processes); default: gvisor for code-interpreter-v1 where the server
        has it, else native. idle_pause pauses it once nobody has used it
        for that many seconds (any call resumes it). secrets names secrets
        of the key's (put_secret) its processes use without seeing them:
        each finds a placeholder in the environment variable of a secret's
        name, which the server replaces with the value in HTTP(S) requests
        to the secret's hosts (network_allow must reach them).
        network_budgets bounds the bytes (both ways, over all its
        connections) it may move with what an entry of network_allow allows,
        by the entry as written there: {"*.pythonhosted.org:443":
        200_000_000}; past one, those connections are reset and new ones
        refused (it needs network_allow: ValueError without it)."""
        if network_budgets and network_allow is None:
            raise ValueError("network_budgets bound entries of network_allow: give network_allow too")
        body: Dict[str, Any] = {}
        if languages:
            body["languages"] = list(languages)
        if auto_pause:
            body["auto_pause"] = True
        if snapshot:
            body["snapshot"] = snapshot
        for key, value in (("template", template), ("timeout_seconds", timeout), ("memory_mb", memory_mb), ("image", image), ("isolation", isolation), ("idle_pause_seconds", idle_pause)):
            if value is not None:
                body[key] = value
        if network_allow is not None:
            body["network"] = _network(network_allow, network_budgets)
        if secrets is not None:
            body["secrets"] = [secrets] if isinstance(secrets, str) else [str(n) for n in secrets]
        if env:
            body["env"] = dict(env)
        if metadata:
            body["metadata"] = dict(metadata)
        _, _, data = client._call("POST", _BASE, body)
        return cls.from_json(_json_object(data), client=client)

    @classmethod
    def list_snapshots(cls, client: Client, sandbox_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """The client's key's snapshots (of sandbox_id only, when given),
        oldest first: each {"id", "names", "sandbox_id", "created_at",
        "size_bytes", "memory"}."""
        path = "/api/sandbox/snapshots"
        if sandbox_id:
            path += "?sandbox_id=" + urllib.parse.quote(sandbox_id, safe="")
        _, _, data = client._call("GET", path)
        return [x for x in _json_object(data).get("snapshots") or [] if isinstance(x, dict)]

    @classmethod
    def delete_snapshot(cls, client: Client, snapshot_id: str) -> None:
        """Deletes one of the key's snapshots (SandboxRunError 404 when there
        is none): sandboxes made from it are not touched."""
        client._call("DELETE", "/api/sandbox/snapshots/" + _seg(snapshot_id))

    @classmethod
    def list(cls, client: Client) -> List["Sandbox"]:
        """The client's key's live sandboxes."""
        _, _, data = client._call("GET", _BASE)
        return [cls.from_json(x, client=client) for x in _json_object(data).get("sandboxes") or [] if isinstance(x, dict)]

    @classmethod
    def get(cls, client: Client, sandbox_id: str) -> "Sandbox":
        """A live sandbox by its id (SandboxRunError 404 when there is none)."""
        _, _, data = client._call("GET", _BASE + "/" + _seg(sandbox_id))
        return cls.from_json(_json_object(data), client=client)

    def refresh(self) -> "Sandbox":
        """The sandbox as the server has it now."""
        return Sandbox.get(self._need_client(), self.id)

    def kill(self) -> None:
        """Ends the sandbox and everything in it."""
        self._need_client()._call("DELETE", self._path(""))

    def set_timeout(self, seconds: float) -> None:
        """Makes the sandbox end seconds from now (sooner or later than it
        would have); end_at follows."""
        _, _, data = self._need_client()._call("POST", self._path("/timeout"), {"timeout_seconds": seconds})
        self.end_at = Sandbox.from_json(_json_object(data)).end_at

    def pause(self, evict: bool = False) -> None:
        """Pauses the sandbox: its processes are frozen where they are and
        its timeout stops, until resume() or any call that needs it running
        (SandboxRunError 409 when it is paused already); state follows. With
        evict it is also written to disk, its memory given back (paused
        already is fine then): under gVisor its processes come back where
        they were, otherwise only its files do."""
        body = {"evict": True} if evict else None
        _, _, data = self._need_client()._call("POST", self._path("/pause"), body)
        self._update(data)

    def resume(self, timeout: Optional[float] = None) -> None:
        """Resumes a paused sandbox (one that runs is left running): its
        timeout is timeout seconds from now, or what was left of it when it
        was paused; state and end_at follow."""
        body = {"timeout_seconds": timeout} if timeout is not None else None
        _, _, data = self._need_client()._call("POST", self._path("/resume"), body)
        self._update(data)

    def set_network(self, allow: Sequence[str], budgets: Optional[Mapping[str, int]] = None) -> None:
        """Changes what the sandbox's network may reach, at once and while
        it runs, to allow (within the server's network.allow; empty: nothing
        at all); its open connections the new list leaves out are reset.
        budgets bounds the bytes it may move by entry of allow, as
        create's network_budgets (none: no bound): an entry that keeps a
        budget keeps what it has moved. network and network_budgets follow.
        A sandbox made without network_allow cannot be given a network, nor
        a budget an entry of allow that is not there, or of no bytes
        (SandboxRunError 400)."""
        body = _network(allow, budgets)
        _, _, data = self._need_client()._call("PUT", self._path("/network"), body)
        self._update(data)
        now = Sandbox.from_json(_json_object(data))
        self.network, self.network_budgets = now.network, now.network_budgets

    def snapshot(self, name: Optional[str] = None) -> Dict[str, Any]:
        """Keeps the sandbox's files (its home and /tmp; under gVisor its
        running processes and memory too) as a snapshot and returns it
        ({"id", "names", "sandbox_id", "created_at", "size_bytes",
        "memory"}): Sandbox.create(client, snapshot=its id) starts a sandbox
        from it. The sandbox is frozen while it is copied."""
        _, _, data = self._need_client()._call("POST", self._path("/snapshots"), {"name": name} if name else None)
        return _json_object(data)

    def fork(self, count: int = 1, timeout: Optional[float] = None) -> List["Sandbox"]:
        """Makes count sandboxes (1 to 100) with this one's files, each its
        own from then on (processes are not carried); SandboxRunError when
        one could not be made."""
        body: Dict[str, Any] = {"count": count}
        if timeout is not None:
            body["timeout_seconds"] = timeout
        _, _, data = self._need_client()._call("POST", self._path("/fork"), body)
        kids = []
        for ch in _json_object(data).get("children") or []:
            if not isinstance(ch, dict) or not isinstance(ch.get("sandbox"), dict):
                raise SandboxRunError(500, "a child of the fork: %s" % (ch.get("error") if isinstance(ch, dict) else ch))
            kids.append(Sandbox.from_json(ch["sandbox"], client=self._client))
        return kids

    def _update(self, data: bytes) -> None:
        now = Sandbox.from_json(_json_object(data))
        self.state, self.end_at, self.evicted = now.state, now.end_at, now.evicted

    @property
    def files(self) -> Files:
        """Its files: read, write, list, stat, mkdir, move, remove."""
        return Files(self)

    # --- processes ---

    def exec(
        self,
        command: Command,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        stdin: Union[str, bytes, None] = None,
        on_stdout: OnOutput = None,
        on_stderr: OnOutput = None,
        pty: Optional[Tuple[int, int]] = None,
    ) -> ProcessResult:
        """Runs a process and waits for its end: command as a str runs
        through `bash -l -c`, a list is an argv. It starts in /work (or
        cwd), with env, and is killed after timeout seconds (timed_out).
        stdin, if given, is its whole standard input (otherwise it reads
        end-of-file). on_stdout and on_stderr get its output as it comes
        (text); the result has all of it as well. With pty=(cols, rows) it
        runs on a terminal, whose output is stdout's. A process that
        cannot start (no such program) raises SandboxRunError (400)."""
        body = _process_body(command, cwd, env, timeout, pty, stdin=stdin is not None)
        path = self._path("/processes")
        return self._follow("POST", path, _encode(body), on_stdout, on_stderr, stdin)

    def start(
        self,
        command: Command,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        stdin: bool = False,
        tag: Optional[str] = None,
    ) -> int:
        """Starts a process in the background and returns its pid at once;
        with stdin=True its standard input stays open for send_stdin."""
        body = _process_body(command, cwd, env, timeout, None, stdin=stdin, tag=tag, background=True)
        _, _, data = self._need_client()._call("POST", self._path("/processes"), body)
        return int(_json_object(data).get("pid") or 0)

    def follow(self, pid: int, *, on_stdout: OnOutput = None, on_stderr: OnOutput = None) -> ProcessResult:
        """Waits for a running process's end, with its output from now on
        (on_stdout, on_stderr, and in the result)."""
        return self._follow("GET", self._path("/processes/%d/events" % int(pid)), None, on_stdout, on_stderr, None)

    def processes(self) -> List[ProcessInfo]:
        """The processes running in the sandbox."""
        _, _, data = self._need_client()._call("GET", self._path("/processes"))
        return [ProcessInfo.from_json(p) for p in _json_object(data).get("processes") or [] if isinstance(p, dict)]

    def send_stdin(self, pid: int, data: Union[str, bytes], close: bool = False) -> None:
        """Writes to the standard input of a process started with stdin=True;
        with close=True its input then ends."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        path = self._path("/processes/%d/stdin" % int(pid)) + ("?close=true" if close else "")
        resp = self._need_client()._open("POST", path, raw, "application/octet-stream")
        resp.close()

    def signal(self, pid: int, signal: Union[str, int] = "SIGTERM") -> None:
        """Sends a signal (a name, "SIGKILL" or "KILL", or a number) to a process."""
        self._need_client()._call("POST", self._path("/processes/%d/signal" % int(pid)), {"signal": signal})

    def _follow(
        self,
        method: str,
        path: str,
        body: Optional[bytes],
        on_stdout: OnOutput,
        on_stderr: OnOutput,
        stdin: Union[str, bytes, None],
    ) -> ProcessResult:
        """Reads a process's event stream to its "exit" event."""
        client = self._need_client()
        resp = client._open(method, path, body, "application/json" if body is not None else None, accept="text/event-stream")
        stream = Stream(resp)
        try:
            ctype = resp.headers.get("Content-Type", "")
            if resp.status != 200 or not ctype.startswith("text/event-stream"):
                raise SandboxRunError(resp.status, "the server answered %s, not an event stream" % (ctype or "nothing"))
            out: Dict[str, List[str]] = {"stdout": [], "stderr": []}
            pty_text = codecs.getincrementaldecoder("utf-8")("replace")
            pid = 0
            while True:
                got = stream._read_event()
                if got is None:
                    raise ConnectionError("the event stream ended before the process did")
                name, data = got
                try:
                    payload = json.loads(data)
                except ValueError:
                    continue
                if not isinstance(payload, dict):
                    continue
                if name == "start":
                    pid = int(payload.get("pid") or 0)
                    if stdin is not None:
                        self.send_stdin(pid, stdin, close=True)
                elif name in ("stdout", "stderr", "pty"):
                    if name == "pty":
                        text = pty_text.decode(base64.b64decode(_str(payload, "data")))
                        name = "stdout"
                    elif _str(payload, "encoding") == "base64":  # output that is not UTF-8 text
                        text = base64.b64decode(_str(payload, "data")).decode("utf-8", "replace")
                    else:
                        text = _str(payload, "data")
                    if text:
                        out[name].append(text)
                        cb = on_stdout if name == "stdout" else on_stderr
                        if cb is not None:
                            cb(text)
                elif name == "exit":
                    tail = pty_text.decode(b"", final=True)
                    if tail:
                        out["stdout"].append(tail)
                        if on_stdout is not None:
                            on_stdout(tail)
                    res = ProcessResult.from_json(payload)
                    res.pid = res.pid or pid
                    res.stdout, res.stderr = "".join(out["stdout"]), "".join(out["stderr"])
                    return res
        finally:
            stream.close()

    # --- helpers ---

    def _path(self, suffix: str) -> str:
        return _BASE + "/" + _seg(self.id) + suffix

    def _need_client(self) -> Client:
        if self._client is None:
            raise RuntimeError("this Sandbox was not made by Sandbox.create, get or list")
        return self._client

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.kill()
        except SandboxRunError as e:
            if e.status != 404:
                raise
