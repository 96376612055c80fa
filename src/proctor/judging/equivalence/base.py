"""What a rule or guard is: a named, language-keyed decision that is sure or silent."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RuleDecision:
    """A rule decided "correct", or a guard "incorrect": which one (`method`, its stable name), and on
    what. `absent`: the guard found nothing of the kind the reference needs in the answer (no number, no
    quantity of its dimension, nothing beyond the question), as opposed to something else in its place —
    the answer did not address the fact rather than got it wrong, which lets a protocol that can ask again
    (RECKON's rounds) do so."""

    method: str
    detail: str
    absent: bool = False


@dataclass(frozen=True)
class Rule:
    """A rule that decides "correct" only when sure (never "incorrect"); `kinds` are the kinds of
    reference it reads (`registry.reference_kind`). Its check's docstring says what it is sure of and its
    measured precision."""

    name: str
    language: str
    kinds: frozenset[str]
    check: Callable[..., RuleDecision | None]

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.check) or ""


@dataclass(frozen=True)
class Guard:
    """A guard after an LLM "correct": it only ever turns it into "incorrect", when sure, and records its
    `name` as the method. `needs_question`: it runs only where the question is known; `reads_question`:
    it is given the question ("" when unknown) and runs without it. Its check's docstring says what it
    is sure of and its measured precision."""

    name: str
    language: str
    check: Callable[..., RuleDecision | None]
    needs_question: bool = False
    reads_question: bool = False
    # It looks for parts of the reference: not asked where the answer gives the reference's "yes" or
    # "no" to a yes/no question (`polar`), whose justification it need not repeat.
    wants_parts: bool = False

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.check) or ""
