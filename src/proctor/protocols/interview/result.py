"""The interview protocol's result: how the base questions were read, the context graph, and per variant
and candidate the JudgeAgent score, base and extension accuracy, extension accuracy by difficulty, the
tier trajectory per batch, the validation rates (ACC1 / ACC2 / CR / CtE) and what went unscored.

The metrics the store holds (`interview.score`, `.acc1`, `.acc2`, `.cr`, `.cte` per candidate, named
`<candidate> [<variant>]` when several variants ran) come from `scores`, which results.json leaves out
(the same numbers are under `variants`). What the report shows beyond results.json — the base questions
as asked, knowledge paths with their questions, feedback, the rounds — is the artifact `interview`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from proctor.estimates import Estimate
from proctor.graph import GraphBuild
from proctor.graph.model import GraphStats
from proctor.kit.result import Artifact, Metric, OmitNone, Part, Result
from proctor.kit.shared.question_file import Difficulty
from proctor.protocols.interview.base import BaseQuestion
from proctor.protocols.interview.extension import GeneratedQuestion, RoundInfo
from proctor.protocols.interview.feedback import Feedback
from proctor.protocols.interview.validation import ValidationRates


class BaseStats(Part):
    """Where the base questions came from and how many were read, used and in how many batches."""

    file: str
    read: int
    usable: int
    skipped: Annotated[dict[str, int] | None, OmitNone()] = None  # question files: skipped by reason
    irt_labelled: Annotated[int | None, OmitNone()] = None  # exam runs: tiers from the IRT difficulty
    sampled: int
    difficulty_sources: dict[str, int]
    used: int
    batches: int


class GraphSummary(GraphBuild, GraphStats):
    """How the context graph came to be (built or reused) and its shape."""


class Unscored(Part):
    base: int
    extension: int
    validation: int


class CandidateResult(Part):
    """One candidate's interview under one variant."""

    score: Estimate  # JudgeAgent's difficulty-weighted mean over every scored question
    base_accuracy: Estimate
    extension_accuracy: Estimate
    extension_by_difficulty: dict[Difficulty, Estimate]
    extension_questions: int
    unscored: Unscored
    validation: ValidationRates
    trajectories: dict[str, list[Difficulty]]  # batch -> tier after the base questions and each round
    batches_without_feedback: int


class VariantResult(Part):
    description: str
    stats: dict[str, int]  # knowledge sources, generated and dropped questions, failed steps
    candidates: dict[str, CandidateResult]


class Scores(Part):
    """The metrics of one subject (a candidate, or `candidate [variant]`)."""

    acc1: Annotated[Estimate, Metric("interview.acc1")]
    acc2: Annotated[Estimate, Metric("interview.acc2")]
    cr: Annotated[Estimate, Metric("interview.cr")]
    cte: Annotated[Estimate, Metric("interview.cte")]
    score: Annotated[Estimate, Metric("interview.score")]


class ExampleStep(Part):
    entity: str
    chunk_id: str
    candidates: list[str]  # the names of the entities the step was drawn from


class ExampleQuestion(GeneratedQuestion):
    tier: Difficulty


class Example(Part):
    """A knowledge text (a path on the graph, or reference text) with the questions written from it."""

    batch: int
    round: int
    source: str
    seed_name: str | None
    stopped: str | None
    steps: list[ExampleStep]
    snippets: list[str]
    questions: list[ExampleQuestion]


class CandidateRounds(Part):
    tiers: list[Difficulty]
    rounds: list[RoundInfo]


class InterviewArtifact(Part):
    """What the report shows beyond results.json (artifact `interview`)."""

    questions: list[BaseQuestion]
    examples: list[Example]
    feedback: list[Feedback]
    rounds: dict[str, dict[str, CandidateRounds]]  # variant -> "candidate|batch" -> tiers and rounds


class InterviewResult(Result):
    base_questions: BaseStats
    graph: GraphSummary | None
    variants: dict[str, VariantResult]
    # The store's metrics by subject; not written to results.json (the numbers are under `variants`).
    scores: dict[str, Scores] = Field(default_factory=dict, exclude=True)
    interview: Annotated[InterviewArtifact | None, Artifact("interview")] = None
