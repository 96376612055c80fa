"""Typed errors. `UserError` is anything the user can fix; the CLI prints it as one paragraph and exits 2."""

from __future__ import annotations


class ProctorError(Exception):
    """Base class for proctor's own errors."""


class UserError(ProctorError):
    """A problem the user can fix (bad config, unreadable corpus, missing key, unreachable server).

    The message must name the file/field and the fix; the CLI shows it without a traceback.
    """


class ModelCallError(ProctorError):
    """A model call failed after retries; callers record it on their item (with `cause`)."""

    def __init__(self, message: str, *, cause: str = "error", status: int | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.status = status


class StructuredOutputError(ModelCallError):
    """The reply could not be parsed into the requested JSON schema, even after the re-asks."""

    def __init__(self, message: str, *, raw: str = "") -> None:
        super().__init__(message, cause="unparseable")
        self.raw = raw
