"""A Python client for sandbox-run, the code-execution sandbox server.

    from sandbox_run import Client

    client = Client("http://127.0.0.1:8080")
    result = client.execute("python", "print(6 * 7)")
    print(result.stdout)  # 42

Secrets (Client.put_secret) are used by runs without being seen:
client.execute(..., secrets=["API_TOKEN"], network=[...]).

Live sandboxes, which keep their files and processes between calls, are
Sandbox objects: Sandbox.create(client).exec("echo hi").stdout.

Standard library only. Answers other than 2xx raise SandboxRunError.
"""

from .client import Client, Stream, __version__, build_request
from .errors import CallError, SandboxRunError
from .models import (
    BatchSummary,
    CallbackStatus,
    CaseResult,
    Destination,
    Event,
    ExceptionInfo,
    FileInfo,
    HTTPRequest,
    Job,
    Language,
    LanguageVersion,
    Limits,
    NetworkReport,
    Result,
    Secret,
    SecretHeader,
    Session,
    SessionFile,
    SkippedFile,
    StepResult,
    TestCase,
)
from .sandbox import FileEntry, Files, ProcessInfo, ProcessResult, Sandbox

__all__ = [
    "BatchSummary",
    "CallError",
    "CallbackStatus",
    "CaseResult",
    "Client",
    "Destination",
    "Event",
    "ExceptionInfo",
    "FileEntry",
    "FileInfo",
    "Files",
    "HTTPRequest",
    "Job",
    "Language",
    "LanguageVersion",
    "Limits",
    "NetworkReport",
    "ProcessInfo",
    "ProcessResult",
    "Result",
    "Sandbox",
    "SandboxRunError",
    "Secret",
    "SecretHeader",
    "Session",
    "SessionFile",
    "SkippedFile",
    "Stream",
    "StepResult",
    "TestCase",
    "__version__",
    "build_request",
]
