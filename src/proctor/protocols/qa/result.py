"""The qa protocol's result: per candidate, accuracy under each configured judge, EM and F1, and how far
the two judges agree, and how often the judge with reference and F1 >= 0.5 disagree (with examples); how
many questions were generated and kept."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

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
    # Share of answers where the judge with reference and F1 >= 0.5 disagree (Wilson interval).
    judge_f1_disagreement: Annotated[Estimate | None, OmitNone(), Metric("judge_f1.disagreement")] = None


class Disagreement(Part):
    """An answer the judge with reference and F1 (cut at 0.5) score differently."""

    candidate: str
    question: str
    reference: str
    answer: str
    f1: float
    verdict: str
    method: str | None = None  # how the judge decided (an equivalence rule, a guard, the LLM)


class QaResult(Result):
    questions: GenerationStats
    candidates: dict[str, QaCandidate]
    # Examples of judge-vs-F1 disagreements, a few per candidate (the judge with reference ran).
    disagreements: list[Disagreement] = Field(default_factory=list)
