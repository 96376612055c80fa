"""The `qa:` section of a run config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from proctor.kit.shared.judges import PanelConfig
from proctor.kit.shared.question_file import BenchmarkQuestionsConfig


class Config(BaseModel):
    """Reference-QA protocol: open questions with reference answers from chunks."""

    model_config = ConfigDict(extra="forbid")

    num_questions: int = Field(
        20,
        ge=1,
        le=100_000,
        description="questions the examiner writes, one per sampled chunk (chunks are reused when there are "
        "fewer); questions dropped as not self-contained or duplicate are not replaced",
    )
    questions: BenchmarkQuestionsConfig | None = Field(
        None,
        description="ask the short-answer questions of this file (with their answers as references) instead "
        "of writing questions from the corpus; a HotpotQA-format file without `corpus.path` also gives the "
        "corpus: its context paragraphs, one document per title",
    )
    questions_per_level: int | None = Field(
        None,
        ge=1,
        description="with `questions`: the first this many of each difficulty level, in file order (null: "
        "the first `num_questions`)",
    )
    judges: list[Literal["with_reference", "without_reference"]] = Field(
        ["with_reference", "without_reference"],
        description="LLM judges that score every answer: with_reference (against the examiner's reference "
        "answer), without_reference (the judge's own knowledge); both = also judge agreement; "
        "empty = exact match and F1 only",
    )
    equivalence_rules: bool = Field(
        True,
        description="before the judge with reference, deterministic rules (normalised match, the reference "
        "contained in the answer, equal quantities or dates) decide 'correct' when sure, without a model "
        "call; the method is recorded on each judgment (bench/judge_agreement.py)",
    )
    guards: bool = Field(
        True,
        description="after the judge with reference says 'correct', guards that are sure turn it into "
        "'incorrect' (the answer cannot state the reference's numbers, has a near miss of a short term, "
        "leaves out a part of a listed reference, or lists alternatives); the guard is recorded as method",
    )
    judge_panel: PanelConfig = Field(
        default_factory=PanelConfig,
        description="self-consistency (samples) and judge ensembles for the LLM judges; the defaults are "
        "one greedy reply of the judge role",
    )
    question_max_tokens: int = Field(
        256, ge=16, description="examiner reply budget (tokens) for one question and its reference answer"
    )
