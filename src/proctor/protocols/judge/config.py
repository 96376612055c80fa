"""The `judge:` section of a run config: which answers file to grade, where its fields are, and how."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from proctor.config_paths import ConfigFile
from proctor.kit.shared.judges import PanelConfig

DEFAULT_KAPPA_WARNING = 0.6


class AnswersFile(BaseModel):
    """An answers file and the names of its fields (columns)."""

    model_config = ConfigDict(extra="forbid")

    path: ConfigFile = Field(
        description="JSONL/JSON, CSV/TSV or Parquet file with one answer per record; a relative path is "
        "relative to the config file"
    )
    format: Literal["auto", "jsonl", "json", "csv", "tsv", "parquet"] = Field(
        "auto", description="file format; auto: from the extension"
    )
    question_field: str = Field("question", description="field with the question")
    reference_field: str = Field("reference", description="field with the reference (gold) answer")
    answer_field: str = Field("answer", description="field with the answer to grade")
    id_field: str = Field(
        "id", description="field with the record's id (when absent from a record: its line or position)"
    )
    label_field: str = Field(
        "label",
        description="field with a human label (correct / incorrect, true / false, 1 / 0, yes / no); "
        "records with one make the judge card; absent or empty: unlabelled",
    )


class Config(BaseModel):
    """Grade an existing answers file against its references with proctor's judge stack."""

    model_config = ConfigDict(extra="forbid")

    answers: AnswersFile = Field(description="the answers to grade")
    labels: ConfigFile | None = Field(
        None,
        description="a separate file of human labels (fields `answers.id_field` and `answers.label_field`); "
        "its labels win over labels in the answers file",
    )
    rules: bool = Field(
        True,
        description="deterministic equivalence rules decide 'correct' when sure, without a model call",
    )
    guards: bool = Field(
        True, description="guards turn an LLM 'correct' into 'incorrect' when they are sure it is wrong"
    )
    judge_panel: PanelConfig = Field(
        default_factory=PanelConfig,
        description="self-consistency samples, judge ensembles and the P(correct) threshold of the LLM judge",
    )
    kappa_warning: float = Field(
        DEFAULT_KAPPA_WARNING,
        ge=-1,
        le=1,
        description="the judge card warns when Cohen's kappa against the labels is below this",
    )
