"""The `exam:` section of a run config: exam generation, filters, the grid of pipelines, IRT."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from proctor.config_paths import ConfigPath

Retriever = Literal["closed_book", "bm25", "dense", "hybrid", "oracle"]
Selection = Literal["auto", "letter_logprobs", "generated_letter", "option_loglik"]

# Default "not self-contained" patterns: the question points at a text the candidate never sees.
DEFAULT_NOT_SELF_CONTAINED = [
    r"\b(according to|in|from|based on|as (stated|described|mentioned) in) (the|this|that|these) "
    r"(text|passage|document|documentation|article|excerpt|reference|context|paragraph|section|source)s?\b",
    r"\bthe (text|passage|document|article|excerpt|paragraph|author) "
    r"(says|states|mentions|describes|notes)\b",
    r"\b(mentioned|described|stated|given|discussed) (above|below|here)\b",
    # Seen with small examiners on research papers: a paper, table or snippet the candidate never sees.
    r"\b(in|from) (the|this|that) "
    r"(paper|study|table|figure|code|code snippet|snippet|chapter|equation|appendix)s?\b",
    r"\b(the|this) (paper|study|table|figure|snippet|chapter|article|work)\s*\?\s*$",
    r"\bthe (first|second|third|last|previous|next|following|preceding) "
    r"(paragraph|section|sentence|table|figure|paper|page|line|example)s?\b",
    r"\bthis (paper|study|work|article|table|figure)\b",
    r"\bthe (table|figure|code snippet|snippet)\b",
]


class Strict(BaseModel):
    """Base of the exam config sections: unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")


class FilterConfig(Strict):
    """A-priori filters on the generated questions (no candidate answers needed). A distractor that fails
    a filter is removed (the examiner writes spares); a question is dropped when it fails a filter itself
    or keeps fewer than three distractors, and every removal is counted by reason. Similarities are
    cosine (the run's `embedder`; those filters are skipped without one) or word n-gram Jaccard with
    n = mean option length in words (as in the method's paper). Defaults were set on the sample corpus so
    that only clear repeats are removed."""

    not_self_contained: list[str] = Field(
        default_factory=lambda: list(DEFAULT_NOT_SELF_CONTAINED),
        description="regular expressions (case-insensitive) for questions that point at a text the candidate "
        "never sees ('according to the passage'); a match drops the question; default: built-in "
        "English patterns",
    )
    # The cosine default is high on purpose: MiniLM puts "40 metres" / "42 metres" at 0.93 (distinct
    # answers) and "six rowers" / "6 rowers" at 0.98 (a repeat).
    option_jaccard: float = Field(
        0.6,
        ge=0,
        le=1,
        description="two options repeat each other at or above this word n-gram Jaccard similarity; "
        "the repeating distractor is removed",
    )
    option_cosine: float = Field(
        0.97,
        ge=0,
        le=1,
        description="two options repeat each other at or above this embedding cosine; high so that close "
        "but distinct answers ('40 metres' / '42 metres') survive",
    )
    option_containment: bool = Field(
        True,
        description="an option whose words all occur in another option repeats it (e.g. 'Kael' / "
        "'Ostrid Kael': a partial correct answer)",
    )
    answer_in_question: float = Field(
        0.8,
        ge=0,
        le=1,
        description="share of the correct answer's word n-grams found in the question at which the question "
        "gives its answer away and is dropped (a distractor found in the question is removed)",
    )
    distractor_source_margin: float | None = Field(
        0.1,
        ge=-1,
        le=1,
        description="a distractor is removed when cos(distractor, source passage) > cos(correct answer, "
        "source passage) + this margin (often a correct-but-partial answer); null = off",
    )
    example_copies: bool = Field(
        True,
        description="drop a question whose text or answer names things from the examiner prompt's worked "
        "example (its proper names, or two of its numbers) that its source passage lacks",
    )
    duplicate_cosine: float = Field(
        0.92,
        ge=0,
        le=1,
        description="a question whose embedding cosine to an earlier kept question is at or above this, and "
        "whose answer repeats that question's answer (as two options would), is dropped as a near duplicate "
        "(exact repeats always are; worded alike with different answers, both are kept)",
    )


class BalanceConfig(Strict):
    """Making surface cues non-informative, so the bias baselines (always the longest or the shortest
    option) stay at chance. The correct letters are always balanced; these options handle the length
    of the correct option."""

    option_lengths: bool = Field(
        True,
        description="choose which spare distractors to keep so that the correct option is the longest in "
        "about a quarter of the questions and the shortest in another quarter; false = the examiner's "
        "first three",
    )
    drop_length_cues: bool = Field(
        True,
        description="then drop the questions with the strongest length cue while the always-longest or "
        "always-shortest baseline exceeds 1/options + length_cue_tolerance (counted as filter `length_cue`)",
    )
    length_cue_tolerance: float = Field(
        0.03,
        ge=0,
        le=0.5,
        description="how far (as a share of questions) the length baselines may exceed chance before "
        "questions are dropped",
    )


class RepairConfig(Strict):
    """Repairing instead of dropping: a question that gives its answer away or points at a text the reader
    never sees gets a rewritten question from the examiner (the words of the key found in it named in the
    prompt); one that fails a distractor check (too few distinct wrong options after the repeat and
    closer-to-source filters, or a correct answer that stands out by its length) gets replacements for
    the removed options. Every filter runs again; a question is dropped only when the repairs fail. Every
    repair is a counted examiner call."""

    attempts: int = Field(
        2,
        ge=0,
        le=5,
        description="repair calls per question at most (each asks for a rewritten question or for "
        "replacement distractors, whichever the question failed); 0 = drop as before",
    )
    key_length_cue: float | None = Field(
        0.25,
        ge=0,
        le=1,
        description="also repair a question whose correct answer is longer than every distractor by at least "
        "this share of its length (it would be recognised by its length); null = off",
    )


class GridConfig(Strict):
    """The pipelines that take the exam: every combination of LLM, retriever and number of in-context
    examples is one subject (row) of the IRT matrix."""

    llms: list[str] = Field(
        default_factory=list,
        description="LLMs of the grid, as keys of `models`; empty = only the run's candidates take the exam "
        "(with `include_candidates`)",
    )
    retrievers: list[Retriever] = Field(
        default_factory=lambda: list[Retriever](["closed_book"]),
        description="retrieval settings crossed with every LLM: closed_book, bm25, dense or hybrid (these "
        "two need `embedder`), oracle (the question's source chunk); each at most once",
    )
    icl_shots: list[int] = Field(
        default_factory=lambda: [0],
        description="numbers of in-context examples (other exam questions with their answers), 0-8, each at "
        "most once; crossed with every LLM and retriever, and with every candidate",
    )
    k: int = Field(
        3,
        ge=1,
        le=50,
        description="passages retrieved per question by the grid's retrievers (ignored by closed_book; "
        "candidates use their own k)",
    )

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
    """Item response theory on the pipelines x questions matrix (1 correct, 0 wrong, missing when the
    answer failed): an ability per pipeline, item parameters, pruning of uninformative items and an
    adaptive-testing replay. Needs at least two pipelines and two questions with answers."""

    enabled: bool = Field(True, description="fit IRT after grading; false = accuracies only")
    # With few subjects per-item slopes are not identified, hence the 1PL below `min_subjects_2pl`.
    model: Literal["auto", "1pl", "2pl", "3pl"] = Field(
        "auto",
        description="model of the main fit; auto: 1PL (one discrimination shared by all items) with fewer "
        "than `min_subjects_2pl` pipelines, else 3PL with the floor set by `guessing` (with "
        "`guessing: fixed`, 2PL slopes plus the chance floor 1/options)",
    )
    min_subjects_2pl: int = Field(
        20, ge=2, description="pipelines needed before `model: auto` fits per-item slopes"
    )
    guessing: Literal["fixed", "estimate"] = Field(
        "fixed",
        description="guessing floor of 3PL fits: fixed at 1/options, or estimated per item (under a Beta "
        "prior centred on 1/options)",
    )
    hierarchical: bool = Field(
        True,
        description="also fit component abilities for each factor (llm, retriever, icl) that varies across "
        "the pipelines (levels of a factor sum to zero)",
    )
    prune: bool = Field(
        True,
        description="drop the least discriminating items step by step, refitting each time; the kept "
        "questions are written to exam_pruned.jsonl and information before/after is reported",
    )
    prune_model: Literal["2pl", "3pl"] = Field(
        "3pl",
        description="model used for pruning (it ranks per-item slopes); 3pl with `guessing: fixed` = 2PL "
        "slopes plus the chance floor",
    )
    prune_fraction: float = Field(
        0.1, gt=0, lt=1, description="share of the remaining items dropped per pruning step (at least one)"
    )
    prune_steps: int = Field(2, ge=1, le=20, description="pruning steps (fit, drop, refit) at most")
    prune_min_items: int = Field(
        10,
        ge=2,
        description="pruning never shrinks the exam below this; an exam this small or smaller is not pruned",
    )
    adaptive: bool = Field(
        True,
        description="replay an adaptive test on each pipeline's answers (most informative item next, EAP "
        "ability) and compare it with the full-exam estimate",
    )
    adaptive_target_se: float = Field(
        0.5,
        gt=0,
        description="the adaptive test stops once the ability's standard error (posterior SD, ability "
        "scale) is at most this",
    )
    adaptive_max_items: int | None = Field(
        None, ge=1, description="item budget of each adaptive test; null = every answered item"
    )
    icc_items: int = Field(
        8, ge=1, le=40, description="items drawn (seeded) for the characteristic-curve plot"
    )


class Config(Strict):
    """Exam protocol (auto-rag-eval): multiple-choice exam from the corpus, graded by a pipeline grid."""

    # Generation.
    exam_file: ConfigPath | None = Field(
        None,
        description="existing exam JSONL to grade instead of generating one (relative paths resolve from "
        "the config file's folder); missing labels are added; null = generate",
    )
    num_questions: int = Field(
        20,
        ge=1,
        le=100_000,
        description="questions asked of the examiner (before filtering; chunks are reused when there are "
        "fewer)",
    )
    top_up: bool = Field(
        True,
        description="when fewer than `num_questions` questions survive the filters and repairs, ask the "
        "examiner for more (further rounds, sized by the keep rate so far; the calls already made are "
        "reused) while the corpus allows — at most 2 x num_questions asked in all, and no chunk asked a "
        "third time — so the exam meets `num_questions`; false = one round of `num_questions`",
    )
    target_questions: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="keep asking until at least this many questions survive the filters: after the first "
        "`num_questions`, further rounds ask for as many more as the observed keep rate suggests (the "
        "calls already made are reused), up to `max_questions` asked; every surviving question is kept, "
        "so the exam can end a little above the target; null = `num_questions` with `top_up`, else one "
        "round of `num_questions`",
    )
    max_questions: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="with `target_questions`: the most questions asked of the examiner over all rounds; "
        "null = 5 x max(num_questions, target_questions) (with `top_up` alone: 2 x num_questions)",
    )
    questions_per_call: int = Field(
        1, ge=1, le=10, description="questions the examiner writes from one chunk in one call"
    )
    distractors: int = Field(
        4,
        ge=3,
        le=8,
        description="wrong options asked for per question; 3 are kept, the spares give the filters and "
        "length balancing a choice",
    )
    chunk_sampling: Literal["random", "spread", "clusters"] = Field(
        "spread",
        description="order in which chunks are used: random (seeded), spread (round-robin over documents, "
        "so a short exam still covers every document) or clusters (round-robin over k-means clusters of "
        "the chunk embeddings — topics within long documents too; needs `embedder`)",
    )
    topic_clusters: int | None = Field(
        None, ge=1, description="clusters for `chunk_sampling: clusters`; null = √(number of chunks)"
    )
    generation_max_tokens: int = Field(
        400, ge=64, description="examiner reply budget (tokens) per question asked in a call"
    )
    filters: FilterConfig = FilterConfig()
    repair: RepairConfig = RepairConfig()
    balance: BalanceConfig = BalanceConfig()
    labels: Literal["examiner", "rules"] = Field(
        "examiner",
        description="who assigns each question's Bloom level and question word: the examiner (in batches; "
        "rules fill what it leaves out) or rules only (no calls)",
    )
    label_batch_size: int = Field(8, ge=1, le=50, description="questions labelled per examiner call")
    # Closed-book answerability.
    guessability: bool = Field(
        True,
        description="the examiner (and guessability_models) answers each kept item without any context; the "
        "probability of the correct option is the item's guessability (report, filter, baseline)",
    )
    guessability_models: list[str] = Field(
        default_factory=list, description="further reference models (keys of `models`) averaged in"
    )
    guessability_samples: int = Field(
        5, ge=1, le=50, description="answers sampled (temperature 0.7) when a server gives no letter logprobs"
    )
    guessability_rule: Literal["readers_agree", "probability"] = Field(
        "readers_agree",
        description="which items count as guessable: readers_agree = every closed-book reader (the examiner "
        "and guessability_models; at least two) picks the correct option — chance agreement of two readers "
        "is about 1/options², so the rule holds whatever the models' calibration; with a single reader it "
        "falls back to probability; probability = the mean probability of the correct option is at least "
        "max_guessability",
    )
    max_guessability: float | None = Field(
        0.75,
        ge=0.0,
        le=1.0,
        description="drop the guessable items (see guessability_rule; with the probability rule, those whose "
        "guessability is at least this — 0.75 = three times chance for 4 options); null = keep all, flag "
        "them in the report only",
    )

    # Grading.
    grid: GridConfig = GridConfig()
    include_candidates: bool = Field(True, description="also grade the run's `candidates:` (x icl_shots)")
    selection: Selection = Field(
        "auto",
        description="how a pipeline's chosen option is read: option_loglik (length-normalised log-likelihood "
        "of each option's text; needs a server with prompt logprobs, e.g. vLLM), letter_logprobs (letter "
        "probabilities of a one-token reply), generated_letter (parsed from a short reply), auto "
        "(option_loglik where the server supports it, else letter logprobs, per item falling back to the "
        "reply)",
    )
    selection_per_model: dict[str, Selection] = Field(
        default_factory=dict, description="`selection` per model, keyed by the name under `models`"
    )
    top_logprobs: int = Field(
        10,
        ge=2,
        le=20,
        description="alternatives requested for the one-token reply when reading letter probabilities",
    )
    generate_max_tokens: int = Field(
        24,
        ge=1,
        description="reply budget (tokens) when the letter is parsed from text (generated_letter, auto's "
        "fallback)",
    )
    irt: IRTConfig = IRTConfig()

    @model_validator(mode="after")
    def _check_rounds(self) -> Config:
        if self.max_questions is not None and self.max_questions < self.num_questions:
            raise ValueError(
                f"max_questions ({self.max_questions}) is below num_questions ({self.num_questions}); "
                "raise max_questions or lower num_questions"
            )
        return self

    def question_target(self) -> int | None:
        """Questions the exam should keep, or None when one round of `num_questions` is all."""
        if self.target_questions is not None:
            return self.target_questions
        return self.num_questions if self.top_up else None

    def question_cap(self, n_chunks: int | None = None) -> int:
        """Most questions asked of the examiner over all generation rounds. A top-up alone (no
        `target_questions`) asks at most twice `num_questions` and, given the corpus's `n_chunks`, asks
        no chunk a third time (never fewer than `num_questions`)."""
        if self.question_target() is None:
            return self.num_questions
        if self.max_questions is not None:
            return self.max_questions
        if self.target_questions is not None:
            return 5 * max(self.num_questions, self.target_questions)
        cap = 2 * self.num_questions
        if n_chunks is not None:
            cap = min(cap, 2 * n_chunks * self.questions_per_call)
        return max(self.num_questions, cap)
