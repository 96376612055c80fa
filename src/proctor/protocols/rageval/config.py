"""The `rageval:` section of a run config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor.agents.config import Limits
from proctor.config_paths import ConfigFile

Level = Literal["KS", "KU", "KA"]
LEVELS: dict[str, str] = {
    "KS": "knowledge seeking: recall one fact",
    "KU": "knowledge understanding: extract or interpret (counts, comparisons, concepts)",
    "KA": "knowledge application: multi-hop reasoning",
}


class GridConfig(BaseModel):
    """Systems = workflows x LLMs (each LLM acting through the domain's tools)."""

    model_config = ConfigDict(extra="forbid")

    workflows: list[Literal["react", "pal", "dfsdt", "function_calling"]] = Field(
        ["react", "pal"], description="agent workflows"
    )
    llms: list[str] = Field(default_factory=list, description="keys of `models`")
    limits: Limits = Limits()
    action_format: Literal["json", "text"] = Field(
        "json",
        description="ReAct / DFSDT steps as JSON under the step's schema (json; text where a provider takes "
        "no JSON schemas) or as R-Eval's 'Thought: / Action: Name[argument]' text (text); the report says "
        "which one each system used",
    )
    step_max_tokens: int = Field(200, ge=16, description="reply budget of one agent turn")
    dfsdt_queries: int = Field(30, ge=1, description="DFSDT: model calls per question (its step limit)")
    sandbox: Literal["auto", "unsafe_local"] = Field(
        "auto",
        description="PAL: the strongest sandbox available (auto), or plain subprocesses (unsafe_local)",
    )


class Config(BaseModel):
    """R-Eval: how well workflow x LLM systems use a domain's knowledge, at three levels."""

    model_config = ConfigDict(extra="forbid")

    database: Literal["academic"] | ConfigFile | None = Field(
        "academic",
        description="a database schema (YAML) for template questions, 'academic' for the shipped fictional "
        "academic database, or null for none",
    )
    templates: ConfigFile | None = Field(
        None, description="question templates (YAML); default: the shipped ones for the academic database"
    )
    instances_per_template: int = Field(3, ge=1, le=1000, description="entities sampled per template")
    expansion: int = Field(
        0, ge=0, le=50, description="templates the examiner proposes from the seed templates and the schema"
    )
    documents: bool = Field(True, description="also ask questions written from the run's corpus")
    document_questions: int = Field(3, ge=0, le=1000, description="document questions per level (KS, KU, KA)")
    hotpotqa: ConfigFile | None = Field(
        None,
        description="a HotpotQA-format file (JSON list or JSONL); its context paragraphs are the documents",
    )
    hotpotqa_questions: int | None = Field(None, ge=1, description="sample this many; null = all")
    hotpotqa_per_level: int | None = Field(
        None,
        ge=1,
        description="instead: the first this many of each HotpotQA level (easy, medium, hard) in file order",
    )
    hotpotqa_settings: list[Literal["shared", "distractor"]] = Field(
        ["shared"],
        description="environments for the HotpotQA questions: `shared` one corpus of every paragraph of the "
        "file (harder), `distractor` each question's own paragraphs (HotpotQA's distractor setting)",
    )
    levels: list[Level] = Field(["KS", "KU", "KA"], description="which levels to ask")
    grid: GridConfig = GridConfig()
    f1_threshold: float = Field(
        0.05, ge=0.0, le=1.0, description="the error taxonomy's F1 cut (R-Eval: 0.05)"
    )
    examiner_max_tokens: int = Field(256, ge=32, description="reply budget of one document question (JSON)")

    @model_validator(mode="after")
    def _one_hotpotqa_sample(self) -> Config:
        if self.hotpotqa_questions is not None and self.hotpotqa_per_level is not None:
            raise ValueError("set hotpotqa_questions or hotpotqa_per_level, not both")
        if not self.hotpotqa_settings:
            raise ValueError("hotpotqa_settings: name at least one of shared, distractor")
        return self
