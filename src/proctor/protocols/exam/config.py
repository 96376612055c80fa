"""The `exam:` section of a run config: exam generation, filters, the grid of pipelines, IRT."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Retriever = Literal["closed_book", "bm25", "dense", "hybrid", "oracle"]
Selection = Literal["auto", "letter_logprobs", "generated_letter", "option_loglik"]

# Default "not self-contained" patterns: the question points at a text the candidate never sees.
DEFAULT_NOT_SELF_CONTAINED = [
    r"\b(according to|in|from|based on|as (stated|described|mentioned) in) (the|this|that|these) "
    r"(text|passage|document|documentation|article|excerpt|reference|context|paragraph|section|source)s?\b",
    r"\bthe (text|passage|document|article|excerpt|paragraph|author) "
    r"(says|states|mentions|describes|notes)\b",
    r"\b(mentioned|described|stated|given|discussed) (above|below|here)\b",
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FilterConfig(Strict):
    """A-priori filters. Similarities are cosine (embedder) or word n-gram Jaccard with n = mean option
    length in words (as in the method's paper). Defaults were set on the sample corpus so that only
    clear repeats are removed."""

    not_self_contained: list[str] = Field(default_factory=lambda: list(DEFAULT_NOT_SELF_CONTAINED))
    # Two options repeat each other when equal after normalisation, when one's words are all in the
    # other ("Kael" / "Ostrid Kael": a partial correct answer), or above either threshold. The cosine
    # default is high on purpose: MiniLM puts "40 metres" / "42 metres" at 0.93 (distinct answers) and
    # "six rowers" / "6 rowers" at 0.98 (a repeat).
    option_jaccard: float = Field(0.6, ge=0, le=1)
    option_cosine: float = Field(0.97, ge=0, le=1)
    option_containment: bool = True
    # The correct answer is given away by the question: share of its n-grams found in the question.
    answer_in_question: float = Field(0.8, ge=0, le=1)
    # A distractor is dropped when cos(distractor, source) > cos(correct, source) + margin
    # (a distractor closer to the source than the answer is often a correct-but-partial answer).
    distractor_source_margin: float | None = Field(0.1, ge=-1, le=1)
    # Questions closer than this (cosine of the question texts) to an earlier kept question are dropped.
    duplicate_cosine: float = Field(0.92, ge=0, le=1)


class BalanceConfig(Strict):
    """Making surface cues non-informative, so the bias baselines stay at chance."""

    # Choose which spare distractors to keep so that the correct option's length rank is balanced.
    option_lengths: bool = True
    # After that, drop the questions with the strongest length cue while the always-longest or
    # always-shortest baseline exceeds 1/options + tolerance (counted as filter `length_cue`).
    drop_length_cues: bool = True
    length_cue_tolerance: float = Field(0.03, ge=0, le=0.5)


class GridConfig(Strict):
    """The pipelines that take the exam: every combination is one subject (row) of the IRT matrix."""

    llms: list[str] = Field(default_factory=list, description="keys of `models`")
    retrievers: list[Retriever] = Field(default_factory=lambda: ["closed_book"])
    icl_shots: list[int] = Field(default_factory=lambda: [0])
    k: int = Field(3, ge=1, le=50, description="passages retrieved per question")

    @model_validator(mode="after")
    def _check(self) -> GridConfig:
        for n in self.icl_shots:
            if not 0 <= n <= 8:
                raise ValueError(f"icl_shots: {n} is out of range; use 0..8 in-context examples")
        if len(set(self.icl_shots)) != len(self.icl_shots) or len(set(self.retrievers)) != len(
            self.retrievers
        ):
            raise ValueError("retrievers and icl_shots must not repeat a value")
        return self


class IRTConfig(Strict):
    """Item response theory on the pipelines x questions matrix."""

    enabled: bool = True
    # auto: 2PL (guessing fixed at 1/options) with at least `min_subjects_2pl` pipelines, else 1PL
    # (one discrimination for all items: with few subjects per-item slopes are not identified).
    model: Literal["auto", "1pl", "2pl", "3pl"] = "auto"
    min_subjects_2pl: int = Field(20, ge=2)
    guessing: Literal["fixed", "estimate"] = "fixed"
    hierarchical: bool = True
    prune: bool = True
    prune_model: Literal["2pl", "3pl"] = "3pl"  # 3pl with `guessing: fixed` = 2PL slopes + chance floor
    prune_fraction: float = Field(0.1, gt=0, lt=1)
    prune_steps: int = Field(2, ge=1, le=20)
    prune_min_items: int = Field(10, ge=2, description="pruning never shrinks the exam below this")
    adaptive: bool = True
    adaptive_target_se: float = Field(0.5, gt=0)
    adaptive_max_items: int | None = Field(None, ge=1)
    icc_items: int = Field(8, ge=1, le=40, description="items drawn in the characteristic-curve plot")


class Config(Strict):
    """Exam protocol (auto-rag-eval): multiple-choice exam from the corpus, graded by a pipeline grid."""

    # Generation (skipped when `exam_file` names an existing exam JSONL).
    exam_file: Path | None = None
    num_questions: int = Field(20, ge=1, le=100_000, description="questions asked of the examiner")
    questions_per_call: int = Field(1, ge=1, le=10)
    distractors: int = Field(4, ge=3, le=8, description="wrong options asked for (3 are kept)")
    chunk_sampling: Literal["random", "spread"] = "spread"
    generation_max_tokens: int = Field(400, ge=64)
    filters: FilterConfig = FilterConfig()
    balance: BalanceConfig = BalanceConfig()
    # Labels: Bloom level and question word.
    labels: Literal["examiner", "rules"] = "examiner"
    label_batch_size: int = Field(8, ge=1, le=50)
    # Grading.
    grid: GridConfig = GridConfig()
    include_candidates: bool = Field(True, description="also grade the run's `candidates:` (x icl_shots)")
    selection: Selection = "auto"
    selection_per_model: dict[str, Selection] = Field(default_factory=dict)
    top_logprobs: int = Field(10, ge=2, le=20)
    generate_max_tokens: int = Field(24, ge=1)
    irt: IRTConfig = IRTConfig()
