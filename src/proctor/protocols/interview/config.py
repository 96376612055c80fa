"""The `interview:` section of a run config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor.config_paths import ConfigFile
from proctor.kit.shared.question_file import BenchmarkQuestionsConfig

Variant = Literal["full", "no_graph", "no_adaptive", "no_extension", "direct"]
VARIANTS: dict[str, str] = {
    "full": "JudgeAgent: graph knowledge paths, adaptive difficulty, extension, feedback",
    "no_graph": "without the context graph: extension questions from the base questions' reference text",
    "no_adaptive": "without adaptive difficulty: every extension question at medium",
    "no_extension": "without extension: feedback from the base answers (with references) only",
    "direct": "direct evaluation: an evaluator writes suggestions from the base answers, no references, "
    "no interview",
}


class Config(BaseModel):
    """JudgeAgent's interview: benchmark grading in batches, difficulty-adaptive extension questions from
    knowledge paths on the corpus's context graph, feedback per batch, and validation by re-answering."""

    model_config = ConfigDict(extra="forbid")

    questions: BenchmarkQuestionsConfig | None = Field(
        None,
        description="the base question file: multiple-choice or short-answer records, optional difficulty "
        "labels (see `questions.*`); give this or `from_run`",
    )
    from_run: ConfigFile | None = Field(
        None,
        description="a finished exam or qa run folder whose questions are the base set: its exam.jsonl "
        "(difficulty from the IRT item difficulty when the exam was calibrated: terciles of b) or its "
        "questions with reference answers (qa)",
    )
    num_questions: int | None = Field(
        None, ge=1, description="sample this many base questions with the run's seed; null = all"
    )
    batch_size: int = Field(3, ge=1, le=20, description="base questions per batch (JudgeAgent: 3)")
    rounds: int = Field(3, ge=0, le=10, description="extension rounds per batch (JudgeAgent: up to 3)")
    questions_per_round: int = Field(
        1, ge=1, le=5, description="extension questions generated and asked per round"
    )
    hops: int = Field(2, ge=0, le=8, description="moves of each knowledge path after its start entity")
    variants: list[Variant] = Field(
        ["full"],
        description="what to run on the same base answers: full, no_graph, no_adaptive, no_extension, "
        "direct; several = the ablation table side by side",
    )
    graph_batch_size: int = Field(4, ge=1, le=32, description="chunks per entity-extraction call")
    max_entities: int = Field(8, ge=1, le=32, description="entities the examiner may name per chunk")
    examiner_max_tokens: int = Field(
        320, ge=32, description="reply budget of one extension-question generation (JSON)"
    )
    feedback_max_tokens: int = Field(400, ge=64, description="reply budget of one batch's feedback (JSON)")
    candidate_max_tokens: int | None = Field(
        None, ge=16, description="per-answer cap for candidates; default: each candidate's max_tokens"
    )
    support_threshold: float = Field(
        0.75,
        ge=0.0,
        le=1.0,
        description="a generated question is kept only if this share of its answer's content words occurs "
        "in the path text (unsupported answers are dropped and counted)",
    )
    examples: int = Field(
        6, ge=0, le=100, description="knowledge paths with their questions shown in the report"
    )

    @model_validator(mode="after")
    def _one_source(self) -> Config:
        if (self.questions is None) == (self.from_run is None):
            raise ValueError(
                "give exactly one base question source: `questions: {path: ...}` (a question file) or "
                "`from_run: <an exam or qa run folder>`"
            )
        if not self.variants or len(set(self.variants)) != len(self.variants):
            raise ValueError("variants: name each variant once, at least one (full, no_graph, ...)")
        return self

    @property
    def uses_graph(self) -> bool:
        return any(v in ("full", "no_adaptive") for v in self.variants) and self.rounds > 0
