"""Typed errors. `UserError` is anything the user can fix; the CLI prints it as one paragraph and exits 2."""

from __future__ import annotations

from typing import Any


class ProctorError(Exception):
    """Base class for proctor's own errors."""


class UserError(ProctorError):
    """A problem the user can fix (bad config, unreadable corpus, missing key, unreachable server).

    The message must name the file/field and the fix; the CLI shows it without a traceback.
    """


class StepError(ProctorError):
    """A unit of work failed; the step runner records it on the unit with `cause`, never drops it.

    Protocol code raises it for failures of its own (a reply that fails a check, say); model-call
    failures are the subclass `ModelCallError`. Causes are short snake_case words — one vocabulary:

    * final (a `--resume` would reproduce them, so it does not retry them): see `FINAL_CAUSES`;
    * anything else is transient (`timeout`, `connection`, `http_429`, `http_5xx`, `bad_response`,
      `truncated`, `budget`, ...) and retried by `--resume`.
    """

    def __init__(self, message: str, *, cause: str = "error", partial: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        # What the unit got done before it failed (e.g. a conversation's finished rounds): recorded as the
        # failed item's data in place of the step's context, so the report shows how far it got.
        self.partial = partial


class ModelCallError(StepError):
    """A model call failed after retries; the step runner records it on its item (with `cause`)."""

    def __init__(self, message: str, *, cause: str = "error", status: int | None = None) -> None:
        super().__init__(message, cause=cause)
        self.status = status


class StructuredOutputError(ModelCallError):
    """The reply could not be parsed into the requested JSON schema, even after the re-asks."""

    def __init__(self, message: str, *, raw: str = "") -> None:
        super().__init__(message, cause="unparseable")
        self.raw = raw


# The one error policy. A final failure is settled: the same config re-run (or resumed) would read the
# same cached reply or meet the same refusal, so it is reported, not retried. `http_401`/`http_403` are
# not final: the user fixes the key and resumes.
FINAL_CAUSES = frozenset(
    {
        "unparseable",  # the reply could not be parsed after the bounded re-asks (cached: same again)
        "unsupported",  # the server lacks a feature the step needs (e.g. prompt logprobs)
        "invalid_output",  # a parsed reply failed the step's own checks
        "http_400",  # the request itself is rejected (e.g. context too long)
        "http_404",
        "http_413",
        "http_422",
    }
)


def is_final(cause: str | None) -> bool:
    """True when a failure with this cause should not be retried by `--resume`."""
    return cause in FINAL_CAUSES


class Terminated(BaseException):
    """The process got a termination signal (SIGTERM) during a run: it unwinds like Ctrl-C (no `except
    Exception` stops it), so the run is marked failed ("interrupted: SIGTERM"), its models closed and its
    store checkpointed before the process exits (code 143)."""

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
