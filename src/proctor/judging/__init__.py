"""Judging: classic answer metrics (EM, F1), LLM judges and confidence intervals.

Example::

    f1("The Treaty of Ambry", ["Treaty of Ambry"])  # 1.0
    v = await judge_with_reference(judge, question=q, answer=a, reference=ref)
    lo, hi = wilson_interval(sum(v.correct for v in verdicts), len(verdicts))
"""

from __future__ import annotations

from proctor.judging.llm import (
    VERDICT_SCHEMA,
    VERDICTS,
    Verdict,
    judge_with_reference,
    judge_without_reference,
)
from proctor.judging.metrics import exact_match, f1, normalize_answer, precision_recall_f1
from proctor.judging.stats import mean_ci, wilson_interval

__all__ = [
    "VERDICTS",
    "VERDICT_SCHEMA",
    "Verdict",
    "exact_match",
    "f1",
    "judge_with_reference",
    "judge_without_reference",
    "mean_ci",
    "normalize_answer",
    "precision_recall_f1",
    "wilson_interval",
]
