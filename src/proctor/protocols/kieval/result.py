"""KIEval's result: which seed questions were used (and why the others were not), per candidate its static
multiple-choice accuracy, KIEval scores (reference and paper weighting), per-aspect scores, rounds and
how its conversations ended, and the contamination analysis across candidates."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from proctor.estimates import Estimate
from proctor.kit.result import Metric, OmitNone, Part, Result


class ConfidentSetStats(Part):
    """Q_V: how many sampled questions the checking models answered right with confidence."""

    enabled: bool
    checked: Annotated[int | None, OmitNone()] = None
    kept: Annotated[int | None, OmitNone()] = None
    dropped_low_confidence: Annotated[int | None, OmitNone()] = None
    dropped_errors: Annotated[int | None, OmitNone()] = None
    threshold: Annotated[float | None, OmitNone()] = None
    shuffles: Annotated[int | None, OmitNone()] = None
    method: Annotated[str | None, OmitNone()] = None
    confidence_from: Annotated[dict[str, int] | None, OmitNone()] = None
    models: Annotated[list[str] | None, OmitNone()] = None


class SeedFileStats(Part):
    """The seed file read: records, usable multiple-choice questions, records skipped by reason."""

    file: str
    read: int
    usable: int
    skipped: dict[str, int] = Field(default_factory=dict)


class QuestionStats(SeedFileStats):
    """The seed file read, the Q_S sample and the questions used."""

    sampled: int
    confident_set: ConfidentSetStats
    used: int


class StaticAccuracy(Estimate):
    """Share of multiple-choice answers naming the right letter; answers naming none count as wrong."""

    no_letter: int = 0
    errors: int = 0


class AspectScores(Part):
    """Mean KIEval score (0-100, reference form) of each aspect over a candidate's scored conversations."""

    accuracy: Annotated[Estimate, Metric("kieval.accuracy")]
    logic: Annotated[Estimate, Metric("kieval.logic")]
    relevance: Annotated[Estimate, Metric("kieval.relevance")]
    coherence: Annotated[Estimate, Metric("kieval.coherence")]
    conciseness: Annotated[Estimate, Metric("kieval.conciseness")]


class KievalCandidate(Part):
    model: str
    retriever: str
    conversations: int
    finished: int
    scored: int
    conversation_errors: int
    kieval: Annotated[Estimate, Metric("kieval.overall")]
    kieval_paper: Annotated[Estimate, Metric("kieval.overall_paper")]
    aspects: AspectScores
    rounds: Annotated[Estimate, Metric("kieval.rounds")]
    stop_reasons: dict[str, int]
    static_accuracy: Annotated[StaticAccuracy, Metric("accuracy.static_mc")]


class ContaminationPoint(BaseModel):
    candidate: str
    static_accuracy: float
    kieval: float
    predicted: float
    residual: float
    leverage: float
    z: float | None
    flagged: bool


class Contamination(Part):
    """The regression of KIEval score on static accuracy across candidates and the candidates flagged far
    below it (`scoring.contamination`); `reason` says why it does not apply."""

    applicable: bool
    n: int
    rule: str
    z: float
    flagged: list[str] = Field(default_factory=list)
    reason: Annotated[str | None, OmitNone()] = None
    # The fit, present when it applies (`r2` None when every KIEval score is equal; `note` None with >= 4
    # candidates).
    slope: float | None = None
    intercept: float | None = None
    r2: float | None = None
    residual_sd: float | None = None
    points: list[ContaminationPoint] = Field(default_factory=list)
    note: str | None = None

    def _lean(self, data: dict[str, Any]) -> dict[str, Any]:
        data = super()._lean(data)
        if not self.applicable:
            for f in ("slope", "intercept", "r2", "residual_sd", "points", "note"):
                data.pop(f, None)
        return data


class KievalResult(Result):
    questions: QuestionStats
    interactor: str
    evaluators: list[str]
    voting: str
    max_rounds: int
    candidates: dict[str, KievalCandidate]
    contamination: Contamination
