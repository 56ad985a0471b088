"""Errors of the sandbox-run client."""

from __future__ import annotations

import email.utils
import time
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .models import ExceptionInfo, Result

__all__ = ["CallError", "SandboxRunError"]


class SandboxRunError(Exception):
    """An answer of the server other than 2xx (or an "error" event that ended
    a stream: status is then the one the event gives, what the same failure
    answers without streaming; 200 from a server that gives none).

    status is the HTTP status, message the server's "error" field (or the
    body's text), retry_after the seconds its Retry-After asked to wait (429
    and 503) or None, execution_id the execution it named, if one. When the
    sandbox could not be set up the server answers 500 with a result of
    status error_setup: result then holds it.
    """

    def __init__(
        self,
        status: int,
        message: str,
        retry_after: Optional[float] = None,
        execution_id: Optional[str] = None,
        result: Optional["Result"] = None,
    ) -> None:
        super().__init__(status, message, retry_after)
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.execution_id = execution_id
        self.result = result

    @property
    def retryable(self) -> bool:
        """The server expects the request to be retried later (429, 503)."""
        return self.status in (429, 503)

    def __str__(self) -> str:
        try:
            phrase = HTTPStatus(self.status).phrase
        except ValueError:
            phrase = ""
        s = "server answered %d%s" % (self.status, " " + phrase if phrase else "")
        if self.message:
            s += ": " + self.message
        if self.retry_after:
            s += " (retry after %gs)" % self.retry_after
        return s

    def __repr__(self) -> str:
        return "SandboxRunError(status=%r, message=%r, retry_after=%r)" % (self.status, self.message, self.retry_after)


class CallError(Exception):
    """An entry point call (Client.call) that did not return: the exception
    it raised (or why its value could not be serialized), or the run's end
    (timeout, a limit), with the whole result."""

    def __init__(self, result: "Result") -> None:
        self.result = result
        self.exception: Optional["ExceptionInfo"] = result.exception
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.exception is not None:
            return "%s: %s" % (self.exception.type, self.exception.message)
        return "call %s: %s" % (self.result.status, self.result.error or "no return value")


def parse_retry_after(value: Any, now: Optional[float] = None) -> Optional[float]:
    """Retry-After as seconds: delay-seconds or an HTTP date; None if neither
    (or not in the future)."""
    if not value:
        return None
    v = str(value).strip()
    if v.isdigit():
        n = int(v)
        return float(min(n, 24 * 3600)) if n > 0 else None
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    delta = when.timestamp() - (time.time() if now is None else now)
    return float(round(delta)) if delta > 0 else None
