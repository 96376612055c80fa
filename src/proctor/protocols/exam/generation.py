"""Exam generation: the examiner writes multiple-choice questions from corpus chunks.

Each examiner call is one item (`exam_draft`) whose unit id is the chunk (id and text), the variant, the
number of questions asked and, for a later variant, its focus excerpt (the kit derives its key), so a
resumed run skips calls already made and a re-run costs nothing.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from proctor.kit.context import RunContext
from proctor.kit.steps import Outcome, Payload
from proctor.models.types import Message
from proctor.prompts import prompt_path, prompt_version, render_messages, render_text
from proctor.protocols.exam.config import Config
from proctor.protocols.exam.filters import MIN_DISTRACTORS, Draft
from proctor.protocols.exam.focus import focus_excerpt

PROMPT = "exam/generate"
EXAMPLE_FILES = ("exam/example_passage.j2", "exam/example_reply.j2")


def generation_prompt_version() -> str:
    """Version of the whole generation prompt: the instructions and the worked example."""
    h = hashlib.sha256(prompt_version(PROMPT).encode())
    for name in EXAMPLE_FILES:
        h.update(prompt_path(name).read_bytes())
    return h.hexdigest()[:12]


def example_passage() -> str:
    """The passage of the prompt's worked example (the filters recognise questions copied from it)."""
    return render_text(EXAMPLE_FILES[0])


def generation_messages(
    passage: str,
    title: str | None,
    n_questions: int,
    n_distractors: int,
    variant: int,
    focus: str | None = None,
) -> list[Message]:
    """System + one worked example (a user turn on an unrelated passage and the ideal reply) + the real
    request. Small examiners copy an inline example; as a previous turn they imitate its form only.
    `focus`: the excerpt of the passage a later variant asks about (`focus.focus_excerpt`). The prompt
    does not list the questions already asked: a small examiner copies such a list back."""
    example_n = min(n_questions, 2)
    shot = render_messages(
        PROMPT,
        passage=example_passage(),
        title="Brannock Valley Railway",
        n_questions=example_n,
        n_distractors=n_distractors,
        variant=0,
        focus=None,
    )
    real = render_messages(
        PROMPT,
        passage=passage,
        title=title,
        n_questions=n_questions,
        n_distractors=n_distractors,
        variant=variant,
        focus=focus,
    )
    reply: Message = {
        "role": "assistant",
        "content": render_text(EXAMPLE_FILES[1], n_questions=example_n, n_distractors=n_distractors),
    }
    return [*shot, reply, real[-1]]


def generation_schema(questions_per_call: int, distractors: int) -> dict[str, Any]:
    """JSON schema of one examiner reply (constrains decoding on servers that support it)."""
    question = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 8},
            "correct_answer": {"type": "string", "minLength": 1},
            "distractors": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": MIN_DISTRACTORS,
                "maxItems": distractors + 2,
            },
            "rationale": {"type": "string"},
        },
        "required": ["question", "correct_answer", "distractors", "rationale"],
    }
    return {
        "type": "object",
        "properties": {
            "questions": {"type": "array", "items": question, "minItems": 1, "maxItems": questions_per_call}
        },
        "required": ["questions"],
    }


@dataclass(frozen=True)
class GenerationCall:
    """One examiner call; a later variant's `focus` is the excerpt of the chunk it asks about, chosen
    from what the earlier variants wrote (filled in when those have run, see `run_generation`)."""

    chunk: Any
    variant: int
    n_questions: int
    focus: str | None = None


def chunk_order(ctx: RunContext[Config], strategy: str, n_clusters: int | None = None) -> list[Any]:
    """Chunks in the order questions are drawn from them.

    `random`: a seeded permutation. `spread`: round-robin over documents (topics), each document's
    chunks in seeded random order, so a short exam still covers every document. `clusters`: the same
    round-robin over k-means clusters of the chunks' embeddings (`n_clusters`, default √chunks), which
    spreads questions over the topics of one long document too."""
    chunks = list(ctx.corpus.chunks)
    if strategy == "random":
        return [chunks[int(i)] for i in ctx.rng.permutation(len(chunks))]
    if strategy == "clusters" and chunks:
        from proctor.clustering import cluster

        k = n_clusters or max(1, round(math.sqrt(len(chunks))))
        x = ctx.embedder.embed([c.text for c in chunks])
        groups = cluster(x, target=len(chunks) / k, cap=len(chunks), method="kmeans", seed=ctx.config.seed)
        return _round_robin(ctx, [[chunks[i] for i in g] for g in groups])
    by_doc: dict[str, list[Any]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    return _round_robin(ctx, list(by_doc.values()))


def _round_robin(ctx: RunContext[Config], groups: list[list[Any]]) -> list[Any]:
    """Groups in seeded random order, each group's members in seeded random order, then one member of
    each group in turn."""
    order = [groups[int(i)] for i in ctx.rng.permutation(len(groups))]
    queues = [[g[int(i)] for i in ctx.rng.permutation(len(g))] for g in order]
    out: list[Any] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def plan_generation(
    ctx: RunContext[Config], cfg: Config, chunks: list[Any], n_questions: int
) -> list[GenerationCall]:
    """The examiner calls that ask `n_questions` in all, `questions_per_call` at a time, cycling over
    `chunks` (a later cycle is a new variant). A larger `n_questions` extends the plan: the calls of a
    smaller one are its prefix (same keys), which is what lets a later generation round reuse them."""
    if not chunks:
        return []
    n_calls = math.ceil(n_questions / cfg.questions_per_call)
    plan = []
    for i in range(n_calls):
        chunk = chunks[i % len(chunks)]
        variant = i // len(chunks)
        n_q = min(cfg.questions_per_call, n_questions - i * cfg.questions_per_call)
        plan.append(GenerationCall(chunk, variant, n_q))
    return plan


class ExamDraft(Payload):
    """One examiner call's questions, as written (filtered when the exam is assembled)."""

    KIND: ClassVar[str] = "exam_draft"
    chunk_id: str
    doc_id: str
    source: str
    variant: int
    n_questions: int
    questions: list[dict[str, Any]]
    generator: str
    prompt_version: str
    focus: str | None = None  # the excerpt a later variant asked about


@dataclass
class Generation:
    """The examiner calls made (or read back from the store), in plan order, and the later variants not
    asked because no sentence of their passage was left uncovered ("passage exhausted")."""

    outcomes: list[Outcome[GenerationCall, ExamDraft]]
    exhausted: list[GenerationCall]


async def run_generation(
    ctx: RunContext[Config], plan: list[GenerationCall], label: str = "writing exam questions"
) -> Generation:
    """The examiner calls of the plan (those done earlier come back from the store).

    Calls run variant by variant: a chunk's later variant asks about a focus excerpt, the sentence its
    earlier variants' questions and answers cover least (`focus.focus_excerpt`), and is not asked when
    none is left. Asked the whole passage again, a small examiner at temperature 0 writes the same
    question (dropped as a near duplicate), even when told which questions were asked. A call's key holds
    its excerpt, which depends only on earlier variants, which a larger plan shares."""
    cfg = ctx.settings
    examiner = ctx.role("examiner")
    version = generation_prompt_version()

    async def write(call: GenerationCall) -> ExamDraft:
        messages = generation_messages(
            call.chunk.text,
            call.chunk.metadata.get("title"),
            call.n_questions,
            cfg.distractors,
            call.variant,
            call.focus,
        )
        c = await examiner.generate(
            messages,
            json_schema=generation_schema(call.n_questions, cfg.distractors),
            temperature=0.0,
            seed=ctx.config.seed + call.variant,
            max_tokens=cfg.generation_max_tokens * call.n_questions,
        )
        return ExamDraft(**_draft_data(call, c.parsed, examiner.spec, version))

    def unit_id(call: GenerationCall) -> tuple[Any, ...]:
        base = (call.chunk.chunk_id, call.chunk.text, call.variant, call.n_questions)
        return (*base, call.focus) if call.focus is not None else base

    written: dict[str, list[tuple[str, str]]] = {}  # chunk id -> (question, answer) of earlier variants
    excerpts: dict[str, list[str]] = {}  # chunk id -> focus excerpts of earlier variants
    done: dict[int, Outcome[GenerationCall, ExamDraft]] = {}
    exhausted: list[GenerationCall] = []
    for variant in sorted({c.variant for c in plan}):
        idx, calls = [], []
        for i, call in enumerate(plan):
            if call.variant != variant:
                continue
            cid = call.chunk.chunk_id
            if variant > 0:
                focus = focus_excerpt(call.chunk.text, written.get(cid, []), excerpts.get(cid, []))
                if focus is None:
                    exhausted.append(call)
                    continue
                excerpts.setdefault(cid, []).append(focus)
                call = replace(call, focus=focus)
            idx.append(i)
            calls.append(call)
        outcomes = await ctx.map(
            label,
            calls,
            write,
            unit_id=unit_id,
            role="examiner",
            output=ExamDraft,
            context=lambda call: _draft_data(call, None, examiner.spec, version),
        )
        for i, o in zip(idx, outcomes, strict=True):
            done[i] = o
            if o.value is not None:
                written.setdefault(o.unit.chunk.chunk_id, []).extend(
                    (str(q.get("question", "")), str(q.get("correct_answer", "")))
                    for q in o.value.questions[: o.unit.n_questions]
                    if isinstance(q, dict)
                )
    return Generation([done[i] for i in sorted(done)], exhausted)


def _draft_data(call: GenerationCall, parsed: Any, generator: str, version: str) -> dict[str, Any]:
    return {
        "chunk_id": call.chunk.chunk_id,
        "doc_id": call.chunk.doc_id,
        "source": call.chunk.source,
        "variant": call.variant,
        "n_questions": call.n_questions,
        "questions": (parsed or {}).get("questions", []),
        "generator": generator,
        "prompt_version": version,
        "focus": call.focus,
    }


@dataclass
class GenerationCounts:
    """Questions asked of the examiner, its calls, questions lost to failed calls (by cause), parsed."""

    planned: int
    calls: int
    calls_failed: dict[str, int]
    generated: int = 0


def drafts_from(outcomes: list[Outcome[GenerationCall, ExamDraft]]) -> tuple[list[Draft], GenerationCounts]:
    """Drafts in plan order plus the generation counts (calls, failures by cause, questions parsed)."""
    stats = GenerationCounts(
        planned=sum(o.unit.n_questions for o in outcomes), calls=len(outcomes), calls_failed={}
    )
    drafts: list[Draft] = []
    for o in outcomes:
        call = o.unit
        if o.value is None:
            cause = o.failure.cause if o.failure is not None else "not_run"
            stats.calls_failed[cause] = stats.calls_failed.get(cause, 0) + call.n_questions
            continue
        d = o.value
        for i, q in enumerate(d.questions[: call.n_questions]):
            stats.generated += 1
            drafts.append(
                Draft(
                    key=f"{o.key}#{i}",
                    question=" ".join(str(q["question"]).split()),
                    correct=" ".join(str(q["correct_answer"]).split()),
                    distractors=[" ".join(str(x).split()) for x in q["distractors"]],
                    rationale=" ".join(str(q.get("rationale") or "").split()),
                    chunk_id=d.chunk_id,
                    doc_id=d.doc_id,
                    source=d.source,
                )
            )
    return drafts, stats
