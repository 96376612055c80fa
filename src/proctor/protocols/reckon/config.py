"""The `reckon:` section of a run config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor.config_paths import ConfigFile

DEFAULT_MAX_CLUSTER = 6
Baseline = Literal["judge_with_reference", "judge_without_reference", "bleu", "rouge_l", "embedding"]
ALL_BASELINES: list[Baseline] = [
    "judge_with_reference",
    "judge_without_reference",
    "bleu",
    "rouge_l",
    "embedding",
]


class Thresholds(BaseModel):
    """Cut-offs that turn the continuous baselines into correct/incorrect for agreement with human labels
    (a score at or above the cut-off counts as correct); used only with `human_labels`."""

    model_config = ConfigDict(extra="forbid")

    bleu: float = Field(0.2, ge=0, le=1, description="sentence BLEU / 100")
    rouge_l: float = Field(0.3, ge=0, le=1, description="ROUGE-L F-measure")
    embedding: float = Field(0.6, ge=-1, le=1, description="cosine similarity")


class Config(BaseModel):
    """RECKON: knowledge units -> clusters -> one question per cluster -> per-unit judging, in rounds."""

    model_config = ConfigDict(extra="forbid")

    # Which chunks feed unit extraction.
    sources: list[str] = Field(
        default_factory=list,
        description="fnmatch patterns on a chunk's file name, path, or `name#index`; empty = every chunk",
    )
    max_chunks: int | None = Field(None, ge=1, description="sample this many chunks (seeded); null = all")

    # Knowledge units.
    max_units_per_chunk: int = Field(
        6, ge=1, le=50, description="most knowledge units the examiner may extract from one chunk"
    )
    unit_max_tokens: int = Field(
        700, ge=64, description="examiner reply budget (tokens) for one chunk's unit extraction"
    )
    unit_max_words: int = Field(
        30,
        ge=5,
        le=200,
        description="most words in one unit (the prompt asks for 25): a longer description is split into its "
        "sentences, each a unit if it fits; a single sentence over the limit is dropped and counted",
    )
    dedup_threshold: float = Field(
        0.92, gt=0, le=1, description="cosine similarity at or above which two units are merged"
    )
    carry_over: ConfigFile | None = Field(
        None,
        description="JSONL of extra units, e.g. a previous run's reckon_uncovered_units.jsonl (relative "
        "paths are relative to the config file)",
    )

    # Clustering.
    cluster_method: Literal["auto", "kmeans", "minibatch", "agglomerative"] = Field(
        "auto",
        description="kmeans (k-means++, 10 restarts), minibatch (MiniBatchKMeans), agglomerative (Ward, "
        "deterministic); auto: kmeans below `minibatch_above` units, minibatch from there on",
    )
    k_selection: Literal["target_size", "silhouette"] = Field(
        "target_size",
        description="number of clusters: target_size (k = units / target_cluster_size) or silhouette (the k "
        "with the best mean cosine silhouette, for corpora with very uneven topics)",
    )
    target_cluster_size: int = Field(
        5,
        ge=1,
        le=200,
        description="units per cluster aimed at, i.e. facts one question asks for; sets k (and the range "
        "of k searched with `silhouette`)",
    )
    max_cluster_size: int | None = Field(
        None,
        ge=1,
        description="most units one question asks about: larger clusters are split in two (by embedding) "
        f"until they fit; default {DEFAULT_MAX_CLUSTER} (the paper averages 5.6 units per question), or "
        "target_cluster_size when that is larger",
    )
    minibatch_above: int = Field(2000, ge=2, description="`auto` uses MiniBatchKMeans from this many units")

    # Questions and answers.
    question_max_tokens: int = Field(
        300, ge=32, description="examiner reply budget (tokens) for one cluster question"
    )
    left_out: Literal["list", "split"] = Field(
        "list",
        description="subjects a cluster question leaves out: list (name them in a sentence added before the "
        "invitation, no extra call or question) or split (re-ask the examiner once, then split them off into "
        "a cluster with its own question: more questions, each the examiner's own)",
    )
    answer_max_tokens: int = Field(
        400, ge=16, description="candidates' reply budget for cluster questions (they ask for several facts)"
    )

    # Judging.
    extract_mode: Literal["cluster", "unit"] = Field(
        "cluster",
        description="stage 1 (the judge selects the answer sentences about each unit, by number): one call "
        "per answer and cluster, or one per answer and unit",
    )
    extract_max_tokens: int = Field(
        700, ge=32, description="judge reply budget (tokens) for one stage-1 extraction call"
    )
    extract_check: bool = Field(
        True,
        description="check each selection with the embedder: a unit whose selected sentences are far from it "
        "while another sentence restates it (and no other unit of the cluster) gets that sentence instead, "
        "recorded as realigned (a small extractor can shift its picks by one across a cluster)",
    )
    judge_mode: Literal["with_extract", "cluster", "unit"] = Field(
        "with_extract",
        description="with_extract (needs extract_mode cluster; with extract_mode unit the default becomes "
        "cluster): the stage-1 call also gives each unit's verdict, and only units the embedding check "
        "realigned get a stage-2 (cluster) call — one call per answer (on 75 units of the method papers: "
        "token ratio 0.44 against the per-unit baseline, two calls 0.62); cluster: a stage-2 call per answer "
        "judging each excerpt against its own reference (one JSON field per unit, with a reason); unit: "
        "one stage-2 call per unit",
    )
    judge_max_tokens: int = Field(
        200,
        ge=32,
        description="judge reply budget (tokens) for one stage-2 verdict on a unit; a cluster call gets "
        "this much per unit it judges",
    )
    extract_max_sentences: int = Field(
        3,
        ge=1,
        le=20,
        description="stage 1 selects, per unit, at most this many of the answer's numbered sentences; the "
        "excerpt judged is those sentences of the answer, never text the judge wrote",
    )

    rules: bool = Field(
        True,
        description="an excerpt that states the unit's description (or source sentence) word for word, with "
        "no negation or alternative around it, is correct without the judge (stage `rule`), as qa's "
        "equivalence rules decide before any model call",
    )
    guards: bool = Field(
        True,
        description='a judge\'s "correct" becomes "incorrect" where a guard of proctor.judging.equivalence '
        "is sure (the excerpt cannot state the unit's numbers, has a near miss of its term, lists "
        "alternatives, or says nothing of the unit beyond what its question said), recorded with the judge's "
        "reason; also on the judge-with-reference baseline (all but the question check)",
    )
    max_rounds: int = Field(
        4,
        ge=1,
        le=50,
        description="rounds per candidate: uncovered and failed units are re-clustered and re-asked until "
        "all are judged, a round whose questions named their units judges nothing new, or this many rounds",
    )

    baselines: list[Baseline] = Field(
        default_factory=lambda: list(ALL_BASELINES),
        description="per-unit reference-QA baselines on the same units and candidates: LLM judge with or "
        "without the reference answer, BLEU, ROUGE-L, embedding cosine; empty = none",
    )
    baseline_question_max_tokens: int = Field(
        200,
        ge=32,
        description="examiner reply budget (tokens) for one baseline question and its reference answer",
    )
    thresholds: Thresholds = Thresholds()

    # Meta-evaluation and report.
    human_labels: ConfigFile | None = Field(
        None,
        description="JSONL of human correct/incorrect labels per (unit, candidate) item for the "
        "meta-evaluation (see README, reckon); null = none",
    )
    examples: int = Field(12, ge=0, le=1000, description="example judgments shown in the report")

    @model_validator(mode="after")
    def _sizes(self) -> Config:
        if self.max_cluster_size is not None and self.max_cluster_size < self.target_cluster_size:
            raise ValueError(
                f"max_cluster_size ({self.max_cluster_size}) must be at least target_cluster_size "
                f"({self.target_cluster_size})"
            )
        if self.extract_mode == "unit" and "judge_mode" not in self.model_fields_set:
            self.judge_mode = "cluster"  # the default one-call mode needs cluster extraction
        if self.judge_mode == "with_extract" and self.extract_mode != "cluster":
            raise ValueError(
                "judge_mode: with_extract needs extract_mode: cluster (got extract_mode: "
                f"{self.extract_mode}); the verdicts come with the one stage-1 call per answer and cluster"
            )
        if len(set(self.baselines)) != len(self.baselines):
            raise ValueError("baselines: list each baseline once")
        return self

    @property
    def cluster_cap(self) -> int:
        return self.max_cluster_size or max(DEFAULT_MAX_CLUSTER, self.target_cluster_size)
