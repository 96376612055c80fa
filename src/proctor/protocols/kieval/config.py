"""The `kieval:` section of a run config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class QuestionsConfig(BaseModel):
    """Where the seed multiple-choice questions are and which fields hold what.

    Every field name is optional: left unset, the common layouts (ARC, MMLU, MedQA, the `exam`
    protocol's JSONL, plain `question`/`choices`/`answer`) are recognised per record.
    """

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="JSONL/JSON, Parquet or CSV/TSV file; relative paths resolve from the cwd")
    format: Literal["auto", "jsonl", "json", "parquet", "csv", "tsv"] = "auto"
    question_field: str | None = None
    choices_field: str | None = Field(None, description="a list, a {label: text} map or ARC's {text, label}")
    option_fields: list[str] | None = Field(None, description="one column per option, e.g. [A, B, C, D]")
    answer_field: str | None = Field(None, description="a letter, a label, an index or the option's text")
    answer_index_base: Literal[0, 1] = Field(0, description="integer answers count from 0 (MMLU) or 1")
    id_field: str | None = None
    subject_field: str | None = None
    csv_header: Literal["auto", "yes", "no"] = Field(
        "auto", description="'no': columns are question, options..., answer (MMLU's original CSVs)"
    )


class ConfidentSetConfig(BaseModel):
    """KIEval's verification step: keep seed questions the interactor and evaluator answer confidently."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    shuffles: int = Field(3, ge=1, le=24, description="option orders per question (from the run's RNG)")
    threshold: float = Field(0.67, ge=0.0, le=1.0, description="keep if confidence >= threshold")
    method: Literal["auto", "shuffles", "logprobs"] = Field(
        "auto",
        description="shuffles: share of orders answered right; logprobs: mean probability of the right "
        "letter; auto: logprobs where the model returns them, else shuffles",
    )


class Config(BaseModel):
    """KIEval: multi-round conversations seeded by benchmark questions, scored per round."""

    model_config = ConfigDict(extra="forbid")

    questions: QuestionsConfig
    num_questions: int | None = Field(None, ge=1, description="sample this many with the run's seed")
    max_rounds: int = Field(5, ge=1, le=20)
    confident_set: ConfidentSetConfig = ConfidentSetConfig()
    evaluators: list[str] | None = Field(
        None, description="keys of `models`; default: the evaluator role alone"
    )
    voting: Literal["majority", "mean"] = "majority"
    interactor_max_tokens: int = Field(160, ge=16)
    evaluator_max_tokens: int = Field(700, ge=64)
    comment_max_chars: int = Field(300, ge=20, le=2000, description="cap on each evaluator comment")
    candidate_max_tokens: int | None = Field(
        None, ge=16, description="per-reply cap for candidates; default: each candidate's max_tokens"
    )
    evaluator_sees_history: bool = Field(True, description="show the evaluator its earlier round scores")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="interactor and evaluator temperature")
    contamination_z: float = Field(
        1.5, gt=0, description="flag candidates whose studentised residual (static accuracy -> KIEval) < -z"
    )

    @model_validator(mode="after")
    def _unique_evaluators(self) -> Config:
        if self.evaluators is not None:
            if not self.evaluators:
                raise ValueError("evaluators: give at least one model key, or leave it out")
            if len(set(self.evaluators)) != len(self.evaluators):
                raise ValueError("evaluators: each model key may appear once")
        return self
