"""A-priori filters of generated multiple-choice questions (no candidate answers needed).

Every removal is counted by reason in the exam statistics. Distractors are filtered one by one (the
examiner writes spares), and a question is dropped only when fewer than three distractors survive or
when the question itself is at fault:

* ``not_self_contained`` — the question points at a text the candidate never sees (regexes).
* ``answer_in_question`` — the question gives its own answer away.
* ``options_repeat`` — a distractor repeats the correct answer, another distractor or the question
  (equal after normalisation; all its words inside the other option, e.g. a partial correct answer;
  word n-gram Jaccard with n = mean option length in words; or embedding cosine).
* ``distractor_closer_to_source`` — a distractor is closer to the source passage than the correct
  answer by more than a margin (embedding cosine), often a sign of a correct-but-partial "wrong" option.
* ``copies_example`` — the question or its answer names things from the prompt's worked example (its
  proper names, or two of its numbers) that the source passage does not contain: small examiners
  sometimes write about the example instead of the passage.
* ``near_duplicate`` — the question repeats an earlier kept question: the same words, or worded alike
  (embedding cosine) with the same answer.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from proctor.protocols.exam.config import FilterConfig

MIN_DISTRACTORS = 3
_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    """Word n-grams; a text shorter than n contributes itself as one gram (so short options compare)."""
    if not tokens:
        return set()
    if len(tokens) < n:
        return {tuple(tokens)}
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def option_ngram_size(options: list[str]) -> int:
    """n = the mean option length in words (rounded, at least 1), as in the method's paper."""
    lengths = [len(words(o)) for o in options if o.strip()]
    return max(1, round(sum(lengths) / len(lengths))) if lengths else 1


def jaccard(a: set[Any], b: set[Any]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def containment(part: set[Any], whole: set[Any]) -> float:
    """Share of `part`'s grams found in `whole` (Jaccard would be diluted by a long question)."""
    if not part:
        return 0.0
    return len(part & whole) / len(part)


def normalise(text: str) -> str:
    return " ".join(words(text))


@dataclass
class Draft:
    """One generated question before assembly: the correct answer and the surviving distractors."""

    key: str  # generation item key + index within the reply
    question: str
    correct: str
    distractors: list[str]
    rationale: str
    chunk_id: str
    doc_id: str
    source: str
    removed: Counter[str] = field(default_factory=Counter)  # distractors removed, by reason
    reason: str | None = None  # why the whole question was dropped
    rejected: list[str] = field(default_factory=list)  # the removed distractors (a repair names them)
    checked: bool = False  # filtered already; a repair that adds distractors clears it


class Embeddings:
    """Embeds texts once per run (the embedder caches persistently as well)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self._vec: dict[str, np.ndarray] = {}

    def prime(self, texts: list[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._vec))
        if todo:
            for t, v in zip(todo, self.embedder.embed(todo), strict=True):
                self._vec[t] = np.asarray(v, dtype=np.float32)

    def cos(self, a: str, b: str) -> float:
        self.prime([a, b])
        return float(np.dot(self._vec[a], self._vec[b]))

    def matrix(self, texts: list[str]) -> np.ndarray:
        self.prime(texts)
        return np.stack([self._vec[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)


@dataclass(frozen=True)
class ExampleTerms:
    """What identifies the worked example's passage: proper names (capitalised words inside a sentence,
    four letters or more) and numbers (three digits or more), lower-cased."""

    names: frozenset[str]
    numbers: frozenset[str]

    @classmethod
    def of(cls, passage: str) -> ExampleTerms:
        names: set[str] = set()
        for sentence in re.split(r"(?<=[.!?])\s+", passage):
            for m in re.finditer(r"(?<!^)\b[A-Z][a-z]{3,}\b", sentence.strip()):
                names.add(m.group(0).lower())
        numbers = set(re.findall(r"\b\d{3,}\b", passage))
        return cls(frozenset(names), frozenset(numbers))

    def copied(self, text: str, source_text: str | None) -> bool:
        """True when `text` uses the example's names (any) or numbers (two) absent from the source."""
        found = set(words(text))
        in_source = set(words(source_text or ""))
        names = (self.names & found) - in_source
        numbers = (self.numbers & found) - in_source
        return bool(names) or len(numbers) >= 2


def compile_patterns(patterns: list[str]) -> list[re.Pattern[str]]:
    return [re.compile(p, re.IGNORECASE) for p in patterns]


def options_repeat(a: str, b: str, n: int, cfg: FilterConfig, emb: Embeddings | None) -> bool:
    """Two options say the same thing: equal after normalisation, all the words of one inside the other,
    word n-gram Jaccard at or above `option_jaccard`, or embedding cosine at or above `option_cosine`."""
    if normalise(a) == normalise(b):
        return True
    wa, wb = set(words(a)), set(words(b))
    if cfg.option_containment and wa and wb and (wa <= wb or wb <= wa):
        return True
    if jaccard(ngrams(words(a), n), ngrams(words(b), n)) >= cfg.option_jaccard:
        return True
    return emb is not None and emb.cos(a, b) >= cfg.option_cosine


def filter_draft(
    d: Draft,
    cfg: FilterConfig,
    patterns: list[re.Pattern[str]],
    emb: Embeddings | None,
    source_text: str | None,
    example: ExampleTerms | None = None,
) -> Draft:
    """Apply the per-question filters in place: drop bad distractors, or mark the question dropped. A
    draft already checked is left as it is (a repair clears `checked` after adding distractors)."""
    if d.checked:
        return d
    d.checked = True
    if any(p.search(d.question) for p in patterns):
        d.reason = "not_self_contained"
        return d
    if (
        example is not None
        and cfg.example_copies
        and example.copied(f"{d.question} {d.correct}", source_text)
    ):
        d.reason = "copies_example"
        return d
    n = option_ngram_size([d.correct, *d.distractors])
    q_grams = ngrams(words(d.question), n)
    correct_grams = ngrams(words(d.correct), n)
    if containment(correct_grams, q_grams) >= cfg.answer_in_question:
        d.reason = "answer_in_question"
        return d

    def repeats(a: str, b: str) -> bool:
        return options_repeat(a, b, n, cfg, emb)

    kept: list[str] = []
    for dis in d.distractors:
        if not dis.strip():
            d.removed["empty"] += 1
        elif (
            repeats(dis, d.correct)
            or any(repeats(dis, k) for k in kept)
            or containment(ngrams(words(dis), n), q_grams) >= cfg.answer_in_question
        ):
            d.removed["options_repeat"] += 1
            d.rejected.append(dis)
        else:
            kept.append(dis)
    if emb is not None and source_text and cfg.distractor_source_margin is not None:
        anchor = emb.cos(d.correct, source_text) + cfg.distractor_source_margin
        closer = [x for x in kept if emb.cos(x, source_text) > anchor]
        d.removed["distractor_closer_to_source"] += len(closer)
        d.rejected += closer
        kept = [x for x in kept if x not in closer]
    d.distractors = kept
    if len(kept) < MIN_DISTRACTORS:
        # Name the question's loss after the filter that took most of its distractors.
        d.reason = d.removed.most_common(1)[0][0] if d.removed else "too_few_distractors"
    return d


def near_duplicates(
    questions: list[str],
    emb: Embeddings | None,
    threshold: float,
    answers: list[str] | None = None,
    cfg: FilterConfig | None = None,
) -> list[bool]:
    """True for each question that repeats an earlier one: the same after normalisation, or worded
    alike (cosine at or above `threshold`) to a kept one with an answer that repeats its answer (as two
    options would, `options_repeat`). Questions worded alike with different answers ask different facts
    ("the year the company was founded" / "... opened") and are both kept. Without `answers` the
    wording alone decides."""
    out: list[bool] = []
    seen: set[str] = set()
    kept_idx: list[int] = []
    mat = emb.matrix(questions) if emb is not None and questions else None
    for i, q in enumerate(questions):
        norm = normalise(q)
        dup = norm in seen
        if not dup and mat is not None and kept_idx:
            sims = mat[kept_idx] @ mat[i]
            alike = [k for k, s in zip(kept_idx, sims, strict=True) if s >= threshold]
            if answers is None:
                dup = bool(alike)
            else:
                fc = cfg or FilterConfig()
                dup = any(
                    options_repeat(
                        answers[i], answers[k], option_ngram_size([answers[i], answers[k]]), fc, emb
                    )
                    for k in alike
                )
        out.append(dup)
        seen.add(norm)  # the same words again are a repeat, even of a question dropped as one
        if not dup:
            kept_idx.append(i)
    return out
