"""Grading: every pipeline of the grid takes the exam; one keyed `exam_response` item per answer.

A pipeline is an LLM, a retriever (closed-book, BM25, dense, hybrid, oracle) with its k, and a number
of in-context examples. The examples for a question are drawn once from the other exam questions
(never the question itself) and are the same for every LLM and retriever, so cells of the grid differ
only in the factor that names them; the 1-shot example is the first of the 2-shot ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from proctor.candidates import Candidate
from proctor.candidates.multiple_choice import check_method, parse_letter, select_option
from proctor.config import CandidateConfig
from proctor.constants import LETTERS
from proctor.errors import StepError, UserError
from proctor.kit.context import RunContext
from proctor.kit.steps import Outcome, Payload
from proctor.prompts import render_messages, render_text
from proctor.protocols.exam.config import Config, Retriever
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.result import PipelineSpec

PROMPT = "exam/answer"
LOGLIK_PROMPT = "exam/answer_loglik"  # plain text continued by each option (option_loglik)


@dataclass(frozen=True)
class Pipeline:
    """One subject of the IRT matrix."""

    name: str
    model: str  # key of `models`
    retriever: str
    k: int
    icl: int
    factors: dict[str, str] = field(default_factory=dict)
    # An agent, Python or HTTP candidate: it answers through its own interface, by letter.
    external: CandidateConfig | None = None

    def spec(self) -> PipelineSpec:
        return PipelineSpec(
            name=self.name,
            model=self.model,
            retriever=self.retriever,
            k=self.k,
            icl=self.icl,
            factors=dict(self.factors),
        )


def build_pipelines(ctx: RunContext[Config], cfg: Config) -> list[Pipeline]:
    """Grid cells (llms x retrievers x icl_shots), then the run's `candidates` x icl_shots. An empty
    list is allowed: the run then only writes the exam (to grade later with `exam_file`)."""
    grid = cfg.grid
    for i, name in enumerate(grid.llms):
        if name not in ctx.config.models:
            raise UserError(
                f"exam.grid.llms[{i}] refers to '{name}', which is not a key of `models` "
                f"{sorted(ctx.config.models)}. Use the name you gave the model under `models:`."
            )
    specs: list[tuple[str, str, Retriever, int, int]] = []
    for llm in grid.llms:
        for retriever in grid.retrievers:
            for icl in grid.icl_shots:
                specs.append((f"{llm}/{retriever}/icl{icl}", llm, retriever, grid.k, icl))
    if cfg.include_candidates:
        for c in ctx.config.candidates:
            if c.model is None or c.agent is not None:
                continue  # other kinds answer by letter through their own interface (below)
            for icl in grid.icl_shots:
                specs.append((f"{c.name}/icl{icl}", c.model, c.retriever, c.k, icl))
    seen: set[tuple[str, str, int, int]] = set()
    out: list[Pipeline] = []
    for name, model, retriever, k, icl in specs:
        ident = (model, retriever, 0 if retriever in ("closed_book", "oracle") else k, icl)
        if ident in seen:
            continue
        seen.add(ident)
        label = retriever if retriever == "closed_book" or k == grid.k else f"{retriever}@k{k}"
        out.append(
            Pipeline(name, model, retriever, k, icl, {"llm": model, "retriever": label, "icl": f"icl@{icl}"})
        )
    needs_embedder = any(p.retriever in ("dense", "hybrid") for p in out)
    if needs_embedder and not ctx.config.embedder:
        raise UserError(
            "exam.grid.retrievers uses dense or hybrid retrieval, which needs `embedder` to be set "
            "(e.g. `embedder: local/all-minilm-l6-v2`)."
        )
    for p in out:
        check_method(
            selection_method(cfg, p.model), f"exam.selection (model '{p.model}')", ctx.models[p.model]
        )
    if cfg.include_candidates:
        for c in ctx.config.candidates:
            if c.model is None or c.agent is not None:
                factors = {"llm": c.name, "retriever": c.kind, "icl": "icl@0"}
                out.append(Pipeline(c.name, c.model or "", "own", 0, 0, factors, external=c))
    return out


def selection_method(cfg: Config, model: str) -> str:
    return cfg.selection_per_model.get(model, cfg.selection)


def draw_examples(ctx: RunContext[Config], exam: list[ExamQuestion], max_shots: int) -> dict[str, list[str]]:
    """For each question, `max_shots` other questions (seeded), nested: icl@1 uses the first of them."""
    n = len(exam)
    out: dict[str, list[str]] = {}
    m = min(max_shots, max(0, n - 1))
    for i, q in enumerate(exam):
        picks: list[int] = [int(j) for j in ctx.rng.permutation(n - 1)[:m]] if m else []
        out[q.id] = [exam[int(j) + (1 if int(j) >= i else 0)].id for j in picks]
    return out


def _contexts(
    ctx: RunContext[Config], pipelines: list[Pipeline], exam: list[ExamQuestion]
) -> dict[tuple[str, int, str], list[Any]]:
    """Retrieved chunks per (retriever, k, question): computed once, shared by LLMs and ICL settings."""
    known = (
        {c.chunk_id for c in ctx.corpus.chunks} if any(p.retriever == "oracle" for p in pipelines) else set()
    )
    out: dict[tuple[str, int, str], list[Any]] = {}
    for p in pipelines:
        if p.retriever == "closed_book" or p.external is not None:
            continue
        cand = Candidate(p.name, ctx.models[p.model], retriever=ctx.retriever(p.retriever), k=p.k)
        for q in exam:
            key = (p.retriever, p.k, q.id)
            if key in out:
                continue
            if p.retriever == "oracle" and not set(q.source_chunk_ids) <= known:
                raise UserError(
                    f"exam question {q.id}: its source_chunk_ids are not chunks of this corpus, so the "
                    "oracle retriever cannot hand them over. Use the corpus (and chunking settings) the exam "
                    "was generated from, or drop `oracle` from exam.grid.retrievers."
                )
            out[key] = cand.context_for(q.question, gold_ids=q.source_chunk_ids)
    return out


def answer_messages(q: ExamQuestion, examples: list[ExamQuestion], context: list[Any]) -> list[Any]:
    n = len(q.choices)
    return render_messages(
        PROMPT,
        letters=list(LETTERS[:n]),
        context=[c.text for c in context],
        examples=[{"question": e.question, "choices": e.choices, "answer": e.answer} for e in examples],
        question=q.question,
        choices=q.choices,
    )


def answer_loglik_prompt(q: ExamQuestion, examples: list[ExamQuestion], context: list[Any]) -> str:
    """The same question, passages and examples as `answer_messages`, as text ending in "Answer:"; the
    examples are answered with their option's text, the form each option is scored in."""
    letters = list(LETTERS[: len(q.choices)])
    return render_text(
        f"{LOGLIK_PROMPT}.user.j2",
        letters=letters,
        context=[c.text for c in context],
        examples=[
            {"question": e.question, "choices": e.choices, "answer_text": e.choices[LETTERS.index(e.answer)]}
            for e in examples
        ],
        question=q.question,
        choices=q.choices,
    )


class ExamResponse(Payload):
    """One pipeline's answer to one exam question, with how the option was selected."""

    KIND: ClassVar[str] = "exam_response"
    pipeline: str
    question_id: str
    answer: str
    example_ids: list[str]
    retrieved_ids: list[str]
    method_requested: str
    selected: str | None
    selected_index: int | None
    correct: bool | None
    method: str | None
    fallback: str | None
    probs: dict[str, float] | None
    letter_mass: float | None
    scores: dict[str, float] | None
    logliks: dict[str, list[float]] | None
    reply: str


@dataclass(frozen=True)
class Sitting:
    """One pipeline answering one question, with its in-context examples and retrieved passages."""

    pipeline: Pipeline
    question: ExamQuestion
    example_ids: list[str]
    context: list[Any]

    def unit_id(self) -> tuple[object, ...]:
        """What the answer depends on: the pipeline (named), the question as shown, the examples and the
        passages retrieved for it."""
        q = self.question
        shown = (self.pipeline.name, q.id, q.question, q.choices)
        if self.pipeline.external is not None:
            return shown
        return (*shown, self.example_ids, [c.chunk_id for c in self.context])


async def grade(
    ctx: RunContext[Config], pipelines: list[Pipeline], exam: list[ExamQuestion]
) -> list[Outcome[Sitting, ExamResponse]]:
    """Every pipeline answers every question; outcomes in plan order."""
    cfg = ctx.settings
    by_id = {q.id: q for q in exam}
    examples = draw_examples(ctx, exam, max((p.icl for p in pipelines), default=0))
    contexts = _contexts(ctx, pipelines, exam)
    plan: list[Sitting] = []
    # Question-major order, pipelines sharing a retriever next to each other: consecutive prompts share
    # their longest prefix (instructions + retrieved passages), which servers with a prompt cache
    # (llama.cpp, vLLM) reuse.
    by_prefix = sorted(pipelines, key=lambda p: (p.retriever, p.k, p.model, p.icl))
    for q in exam:
        for p in by_prefix:
            ex_ids = examples[q.id][: p.icl]
            own = p.retriever == "closed_book" or p.external is not None
            context = [] if own else contexts[(p.retriever, p.k, q.id)]
            plan.append(Sitting(p, q, ex_ids, context))

    def base(s: Sitting) -> dict[str, Any]:
        return {
            "pipeline": s.pipeline.name,
            "question_id": s.question.id,
            "answer": s.question.answer,
            "example_ids": s.example_ids,
            "retrieved_ids": [c.chunk_id for c in s.context],
            "method_requested": "generated_letter"
            if s.pipeline.external is not None
            else selection_method(cfg, s.pipeline.model),
        }

    async def sit(s: Sitting) -> ExamResponse:
        q, p = s.question, s.pipeline
        if p.external is not None:
            return await _sit_external(ctx, s, base(s))
        shown = [by_id[i] for i in s.example_ids]
        sel = await select_option(
            ctx.models[p.model],
            answer_messages(q, shown, s.context),
            q.choices,
            method=selection_method(cfg, p.model),
            seed=ctx.config.seed,
            top_logprobs=cfg.top_logprobs,
            generate_max_tokens=cfg.generate_max_tokens,
            loglik_prompt=answer_loglik_prompt(q, shown, s.context),
        )
        return ExamResponse(
            **base(s),
            selected=sel.letter,
            selected_index=sel.index,
            correct=sel.letter == q.answer,
            method=sel.method,
            fallback=sel.fallback,
            probs=sel.probs,
            letter_mass=sel.letter_mass,
            scores=sel.scores,
            logliks=sel.logliks,
            reply=sel.text,
        )

    return await ctx.map(
        "grading pipelines",
        plan,
        sit,
        unit_id=Sitting.unit_id,
        role="candidate",
        output=ExamResponse,
        context=lambda s: base(s) | {"selected": None, "correct": None, "method": None},
    )


async def _sit_external(ctx: RunContext[Config], s: Sitting, base: dict[str, Any]) -> ExamResponse:
    """An agent, Python or HTTP candidate answers with the options shown; its reply must name one (the
    letter parsed robustly; a reply naming none is an error on the item, cause `unparseable`)."""
    assert s.pipeline.external is not None
    q = s.question
    ans = await ctx.candidate(s.pipeline.external).answer(q.question, list(q.choices))
    letter = parse_letter(ans.text, list(q.choices))
    if letter is None:
        raise StepError(f"the reply names no option: {ans.text[:200]!r}", cause="unparseable")
    return ExamResponse(
        **base,
        selected=letter,
        selected_index=LETTERS.index(letter),
        correct=letter == q.answer,
        method="generated_letter",
        fallback=None,
        probs=None,
        letter_mass=None,
        scores=None,
        logliks=None,
        reply=ans.text,
    )
