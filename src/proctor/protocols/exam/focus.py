"""Focus excerpts: the part of a passage that a later pass over it (a chunk's variant > 0) asks about.

Asked a passage again at temperature 0, a small examiner writes the question it wrote before, and a prompt
that lists the questions already asked does not stop it: it copies the list. So a later pass is steered
by what it is shown instead: the sentence whose facts the passage's earlier questions and answers cover
least. A passage with no such sentence left is not asked again (a repeat would only be dropped).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from proctor.corpus.chunking import split_paragraphs, split_sentences
from proctor.judging.equivalence.numbers import stated_numbers
from proctor.judging.equivalence.terms import asked, informative, names

MIN_WORDS = 5  # a shorter sentence (a heading, "See below.") states no checkable fact on its own
SHORT_WORDS = 10  # a focus sentence shorter than this is shown with its neighbour
FACT_WEIGHT = 3  # a number or a name counts as much as this many other content words
_LIST_ITEM = re.compile(r"\n(?=[ \t]*(?:[-*•]|\d+[.)])\s)")  # a line break before a list item
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


@dataclass(frozen=True)
class FactSentence:
    """A sentence of the passage with what it states: names (stems), numbers and other content words."""

    index: int
    text: str
    names: frozenset[str]
    numbers: frozenset[float]
    words: frozenset[str]

    @classmethod
    def of(cls, index: int, text: str) -> FactSentence:
        found = frozenset(names(text))
        words = frozenset(w for w in informative(text) - found if not any(c.isdigit() for c in w))
        return cls(index, text, found, frozenset(stated_numbers(text)), words)

    @property
    def checkable(self) -> bool:
        """It states a number or a name, in a sentence long enough to ask about."""
        return bool(self.names or self.numbers) and len(self.text.split()) >= MIN_WORDS


@dataclass(frozen=True)
class Written:
    """What the earlier questions and correct answers of a passage state (stems and numbers), and what
    the answers alone state (the facts that were asked for, not the subject a question names)."""

    stems: frozenset[str]
    numbers: frozenset[float]
    answer_stems: frozenset[str]
    answer_numbers: frozenset[float]

    @classmethod
    def of(cls, items: Sequence[tuple[str, str]]) -> Written:
        questions = [q for q, _ in items]
        answers = [a for _, a in items]
        return cls(
            frozenset().union(*(asked(t) for t in questions + answers)),
            frozenset().union(*(stated_numbers(t) for t in questions + answers)),
            frozenset().union(*(asked(a) for a in answers)),
            frozenset().union(*(stated_numbers(a) for a in answers)),
        )


def sentences(passage: str) -> list[str]:
    """The passage's sentences in order: paragraph by paragraph, each list item on its own (without its
    marker), Markdown headings left out."""
    blocks = [
        _LIST_MARKER.sub("", b)
        for p in split_paragraphs(passage)
        if not p.startswith("#")
        for b in _LIST_ITEM.split(p)
    ]
    return [s for b in blocks for s in split_sentences(" ".join(b.split()))]


def coverage(s: FactSentence, w: Written) -> float:
    """How much of the sentence the earlier questions and answers state, 0..1: its names and numbers
    weigh `FACT_WEIGHT` each, its other content words 1."""
    total = FACT_WEIGHT * (len(s.names) + len(s.numbers)) + len(s.words)
    if total == 0:
        return 1.0
    have = FACT_WEIGHT * (len(s.names & w.stems) + len(s.numbers & w.numbers)) + len(s.words & w.stems)
    return have / total


def covered(s: FactSentence, w: Written) -> bool:
    """Every name and number of the sentence stands in an earlier question or answer, and one of them
    was an answer: that fact has been asked for. (A name alone in the questions is usually the subject
    they name, which other sentences of the passage state new facts about.)"""
    all_stated = s.names <= w.stems and s.numbers <= w.numbers
    answered = bool(s.names & w.answer_stems or s.numbers & w.answer_numbers)
    return all_stated and answered


def focus_excerpt(passage: str, written: Sequence[tuple[str, str]], used: Sequence[str] = ()) -> str | None:
    """The excerpt a later pass over `passage` asks about: of the sentences that state a checkable fact,
    not yet covered by the earlier (question, correct answer) pairs `written` and not in an excerpt an
    earlier pass was given (`used`), the least covered (ties: passage order); a short one together with
    the sentence after it (before it, at the end). None when no such sentence is left."""
    texts = sentences(passage)
    w = Written.of(written)
    candidates = [
        s
        for s in (FactSentence.of(i, t) for i, t in enumerate(texts))
        if s.checkable and not covered(s, w) and not any(s.text in u for u in used)
    ]
    if not candidates:
        return None
    best = min(candidates, key=lambda s: (coverage(s, w), s.index))
    if len(best.text.split()) >= SHORT_WORDS or len(texts) == 1:
        return best.text
    if best.index + 1 < len(texts):
        return f"{best.text} {texts[best.index + 1]}"
    return f"{texts[best.index - 1]} {best.text}"
