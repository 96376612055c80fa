"""What the equivalence layer decides for one item, by method name: the shared probes of the
equivalence tests (`decide` = a rule's credit before any model call, `veto` = a guard's veto)."""

from __future__ import annotations

from proctor.judging.equivalence import decide, veto


def rule_method(answer: str, reference: str, question: str = "") -> str | None:
    """The rule that credits the answer without a model call, or None."""
    d = decide(answer, reference, question)
    return d.method if d else None


def guard_method(answer: str, reference: str, question: str = "") -> str | None:
    """The guard that would overrule an LLM "correct", or None."""
    d = veto(answer, reference, question)
    return d.method if d else None
