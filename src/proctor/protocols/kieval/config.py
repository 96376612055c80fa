"""The `kieval:` section of a run config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor.kit.shared.question_file import QuestionsConfig


class ConfidentSetConfig(BaseModel):
    """KIEval's verification step: keep only the seed questions that the interactor and every evaluator
    answer right with confidence (the models that probe and score a conversation must know the answer)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="run the verification step; false = use every sampled question")
    shuffles: int = Field(3, ge=1, le=24, description="option orders per question (from the run's RNG)")
    threshold: float = Field(
        0.67, ge=0.0, le=1.0, description="keep if every checking model's confidence >= threshold"
    )
    method: Literal["auto", "shuffles", "logprobs"] = Field(
        "auto",
        description="shuffles: share of orders answered right; logprobs: mean probability of the right "
        "letter; auto: logprobs where the model returns them, else shuffles",
    )


class Config(BaseModel):
    """KIEval: multi-round conversations seeded by benchmark questions, scored per round."""

    model_config = ConfigDict(extra="forbid")

    questions: QuestionsConfig
    num_questions: int | None = Field(
        None,
        ge=1,
        description="sample this many seed questions with the run's seed (before the confident set); "
        "null = all",
    )
    max_rounds: int = Field(
        5,
        ge=1,
        le=20,
        description="follow-up rounds per conversation (interactor question, candidate reply, evaluation); "
        "the evaluators may stop it earlier",
    )
    confident_set: ConfidentSetConfig = ConfidentSetConfig()
    evaluators: list[str] | None = Field(
        None, description="keys of `models`; default: the evaluator role alone"
    )
    voting: Literal["majority", "mean"] = Field(
        "majority",
        description="how several evaluators' scores combine per round: majority (most frequent score, "
        "ties to the lowest) or mean; a conversation stops when more than half say so",
    )
    interactor_max_tokens: int = Field(
        160, ge=16, description="reply budget (tokens) of the interactor's follow-up question"
    )
    evaluator_max_tokens: int = Field(
        700, ge=64, description="reply budget (tokens) of one evaluator's JSON evaluation of a round"
    )
    comment_max_chars: int = Field(300, ge=20, le=2000, description="cap on each evaluator comment")
    candidate_max_tokens: int | None = Field(
        None,
        ge=16,
        description="per-reply cap for candidates (multiple-choice answer and follow-ups); default: each "
        "candidate's max_tokens",
    )
    evaluator_sees_history: bool = Field(
        True, description="show each evaluator its own overall scores and comments of earlier rounds"
    )
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
