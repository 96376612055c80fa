"""The qa protocol's result: per candidate, accuracy under each configured judge, EM and F1, and how far
the two judges agree; how many questions were generated and kept."""

from __future__ import annotations

from typing import Annotated

from proctor.estimates import Estimate
from proctor.kit.result import Metric, OmitNone, Part, Result
from proctor.kit.shared.questions import GenerationStats


class JudgedAccuracy(Estimate):
    """Accuracy under one judge, with how many answers that judge could not score (not in `n`)."""

    judge_errors: int = 0


class QaCandidate(Part):
    model: str
    retriever: str
    questions: int
    answered: int
    answer_errors: int
    accuracy_with_reference: Annotated[
        JudgedAccuracy | None, OmitNone(), Metric("accuracy.llm_with_reference")
    ] = None
    accuracy_without_reference: Annotated[
        JudgedAccuracy | None, OmitNone(), Metric("accuracy.llm_without_reference")
    ] = None
    em: Annotated[Estimate, Metric("em.mean")]
    f1: Annotated[Estimate, Metric("f1.mean")]
    # Share of answers both judges gave the same verdict (only when both judges ran).
    judge_agreement: Annotated[float | None, OmitNone(), Metric()] = None


class QaResult(Result):
    questions: GenerationStats
    candidates: dict[str, QaCandidate]
