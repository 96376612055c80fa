"""The `kieval:` section of a run config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor.config_paths import ConfigFile


class QuestionsConfig(BaseModel):
    """Where the seed multiple-choice questions are and which fields hold what. Every field name is
    optional: left unset, the common layouts (ARC, MMLU, MedQA, the `exam` protocol's JSONL, plain
    `question`/`choices`/`answer`) are recognised per record; unreadable records are skipped and counted."""

    model_config = ConfigDict(extra="forbid")

    path: ConfigFile = Field(
        description="JSONL/JSON, Parquet or CSV/TSV file; a relative path is relative to the config file"
    )
    format: Literal["auto", "jsonl", "json", "parquet", "csv", "tsv"] = Field(
        "auto",
        description="file format; auto: from the extension (.jsonl/.ndjson, .json, .parquet, .csv, .tsv)",
    )
    question_field: str | None = Field(
        None, description="field with the question text; default: question, input, prompt, query, stem, ..."
    )
    choices_field: str | None = Field(
        None,
        description="a list, a {label: text} map or ARC's {text, label}; default: choices, options, "
        "endings, ..., else columns A, B, C, ...",
    )
    option_fields: list[str] | None = Field(None, description="one column per option, e.g. [A, B, C, D]")
    answer_field: str | None = Field(
        None,
        description="a letter, a label, an index or the option's text; default: answer_idx, answerKey, "
        "answer_index, answer, label, target, ...",
    )
    answer_index_base: Literal[0, 1] = Field(0, description="integer answers count from 0 (MMLU) or 1")
    id_field: str | None = Field(
        None,
        description="field with a question id; default: id, question_id, qid, ...; none = a hash of the "
        "question, options and answer",
    )
    subject_field: str | None = Field(
        None,
        description="field with the question's subject, kept with it; default: subject, category, task, ...",
    )
    csv_header: Literal["auto", "yes", "no"] = Field(
        "auto",
        description="'yes': the first row names the columns; 'no': columns are question, options..., answer "
        "(MMLU's original CSVs); 'auto': a header when the first row names a known field",
    )


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
