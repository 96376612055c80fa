"""Exam statistics and bias baselines: how a test-taker that reads no question would score.

* best fixed letter — always answer the same letter, the best one in hindsight;
* always-longest / always-shortest option — ties split evenly (a question whose options are all equally
  long gives 1/4), so the baseline measures the length cue and nothing else.

All three should sit near chance (1/options); the report shows them with a 95% Wilson interval.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from proctor.constants import LETTERS
from proctor.estimates import Estimate
from proctor.protocols.exam.assemble import length_credit
from proctor.protocols.exam.filters import words


def bias_baselines(exam: list[dict[str, Any]]) -> dict[str, Any]:
    """Scores of the three no-knowledge strategies, the letter distribution and option-length facts."""
    n = len(exam)
    n_options = max((len(q["choices"]) for q in exam), default=4)
    letter_set = LETTERS[:n_options]
    letters = Counter(q["answer"] for q in exam)
    out: dict[str, Any] = {
        "n": n,
        "chance": 1.0 / n_options,
        "letter_counts": {x: letters.get(x, 0) for x in letter_set},
    }
    if n == 0:
        return out
    best_letter = max(letter_set, key=lambda x: (letters.get(x, 0), -letter_set.index(x)))
    k = letters.get(best_letter, 0)
    out["best_fixed_letter"] = {"letter": best_letter, **Estimate.proportion(k, n).model_dump()}
    for pick in ("longest", "shortest"):
        # Ties give fractional credit: the value is the exact share, the interval that of its rounding.
        credit = sum(length_credit(q["choices"], q["answer_index"], pick) for q in exam)
        rounded = Estimate.proportion(round(credit), n)
        out[f"always_{pick}"] = rounded.model_copy(update={"value": round(credit / n, 6)}).model_dump()
    correct_len = [len(q["choices"][q["answer_index"]]) for q in exam]
    other_len = [len(c) for q in exam for i, c in enumerate(q["choices"]) if i != q["answer_index"]]
    out["mean_correct_chars"] = sum(correct_len) / n
    out["mean_distractor_chars"] = sum(other_len) / len(other_len) if other_len else None
    out["mean_question_chars"] = sum(len(q["question"]) for q in exam) / n
    out["mean_question_words"] = sum(len(words(q["question"])) for q in exam) / n
    return out


def max_baseline_gap(baselines: dict[str, Any]) -> float | None:
    """Largest distance of the three baselines from chance (the acceptance figure)."""
    vals = [
        baselines.get(k, {}).get("value") for k in ("best_fixed_letter", "always_longest", "always_shortest")
    ]
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return max(abs(v - baselines["chance"]) for v in vals)


def distribution(exam: list[dict[str, Any]], key: str) -> dict[str, int]:
    return dict(sorted(Counter(str(q.get(key) or "unknown") for q in exam).items()))
