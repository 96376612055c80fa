"""Transitional: the run context moved to `proctor.protocols.context` (removed once every protocol is
ported to the step runner)."""

from proctor.protocols.context import RunContext, work_key

__all__ = ["RunContext", "work_key"]
