"""Exam statistics and bias baselines: how a test-taker that reads no question would score.

* best fixed letter — always answer the same letter, the best one in hindsight;
* always-longest / always-shortest option — ties split evenly (a question whose options are all equally
  long gives 1/4), so the baseline measures the length cue and nothing else.

All three should sit near chance (1/options); the report shows them with a 95% Wilson interval.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from proctor.constants import LETTERS
from proctor.estimates import Estimate
from proctor.protocols.exam.assemble import length_credit
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.filters import words
from proctor.protocols.exam.result import Baselines, LetterBaseline


def bias_baselines(exam: Sequence[ExamQuestion]) -> Baselines:
    """Scores of the three no-knowledge strategies, the letter distribution and option-length facts."""
    n = len(exam)
    n_options = max((len(q.choices) for q in exam), default=4)
    letter_set = LETTERS[:n_options]
    letters = Counter(q.answer for q in exam)
    out = Baselines(n=n, chance=1.0 / n_options, letter_counts={x: letters.get(x, 0) for x in letter_set})
    if n == 0:
        return out
    best_letter = max(letter_set, key=lambda x: (letters.get(x, 0), -letter_set.index(x)))
    k = letters.get(best_letter, 0)
    out.best_fixed_letter = LetterBaseline(letter=best_letter, **Estimate.proportion(k, n).model_dump())
    # Ties give fractional credit: the value is the exact share, the interval that of its rounding.
    out.always_longest = _length_baseline(exam, "longest")
    out.always_shortest = _length_baseline(exam, "shortest")
    correct_len = [len(q.correct_option) for q in exam]
    other_len = [len(c) for q in exam for i, c in enumerate(q.choices) if i != q.answer_index]
    out.mean_correct_chars = sum(correct_len) / n
    out.mean_distractor_chars = sum(other_len) / len(other_len) if other_len else None
    out.mean_question_chars = sum(len(q.question) for q in exam) / n
    out.mean_question_words = sum(len(words(q.question)) for q in exam) / n
    return out


def _length_baseline(exam: Sequence[ExamQuestion], pick: Literal["longest", "shortest"]) -> Estimate:
    credit = sum(length_credit(q.choices, q.answer_index, pick) for q in exam)
    rounded = Estimate.proportion(round(credit), len(exam))
    return rounded.model_copy(update={"value": round(credit / len(exam), 6)})


def max_baseline_gap(baselines: Baselines) -> float | None:
    """Largest distance of the three baselines from chance (the acceptance figure)."""
    named = (baselines.best_fixed_letter, baselines.always_longest, baselines.always_shortest)
    vals = [b.value for b in named if b is not None and b.value is not None]
    if not vals:
        return None
    return max(abs(v - baselines.chance) for v in vals)


def distribution(
    exam: Sequence[ExamQuestion], key: Literal["bloom", "question_word", "topic"]
) -> dict[str, int]:
    return dict(sorted(Counter(str(getattr(q, key) or "unknown") for q in exam).items()))
