"""Baselines on the same units and candidates: the per-unit reference-QA approach of the core.

For every unit the examiner reads the unit's source chunk and writes one question about that unit with a
short reference answer (as the qa protocol does per chunk); every candidate answers it with the core
`Candidate.answer`; the answer is then scored by

* the core LLM judge *with* the reference answer ("judge with reference", J w/R — the cost baseline),
* the core LLM judge *without* a reference (J w/oR, the judge's own knowledge),
* sentence BLEU (sacrebleu, /100), ROUGE-L F-measure (rouge-score, stemmed) and the embedding cosine
  similarity between answer and reference answer.

Calls are made under their own roles (baseline:question, baseline:answer, baseline:judge,
baseline:judge_noref), so the store's call totals separate them from RECKON's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from proctor.candidates import SystemUnderTest
from proctor.config import CandidateConfig
from proctor.corpus.types import Chunk
from proctor.errors import UserError
from proctor.kit.context import RunContext
from proctor.kit.shared.answers import AnswerItem, AnswerTask, answer_questions
from proctor.kit.shared.judges import JUDGE_NAMES, JudgeKind, judge_answers
from proctor.kit.shared.questions import Question, QuestionTask, write_questions
from proctor.kit.steps import Judgment
from proctor.prompts import prompt_version
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.questions import leaked_values, redact
from proctor.protocols.reckon.units import KnowledgeUnit

if TYPE_CHECKING:
    from proctor.embeddings.base import Embedder

PROMPT = "reckon/baseline_question"
JW_R = JUDGE_NAMES["with_reference"]
JW_OR = JUDGE_NAMES["without_reference"]
ROLES = {
    "question": "baseline:question",
    "answer": "baseline:answer",
    JW_R: "baseline:judge",
    JW_OR: "baseline:judge_noref",
}


class BaselineQuestion(Question):
    KIND: ClassVar[str] = "baseline_question"


class BaselineAnswer(AnswerItem):
    KIND: ClassVar[str] = "baseline_answer"


@dataclass
class BaselineOutcome:
    """The baseline on one (candidate, unit): its answer's key (None without a question) and each score
    by its judgment name (only for an answered question; None where that judge failed)."""

    answer_key: str | None = None
    scores: dict[str, float | None] = field(default_factory=dict)


def _blank_leaks(q: BaselineQuestion, unit: KnowledgeUnit) -> BaselineQuestion:
    """The same rule as RECKON's questions: numbers of the unit the question gives away are blanked out,
    so a candidate that repeats the question is not credited with them (the two methods stay comparable)."""
    values = leaked_values([unit], q.question).get(unit.unit_id)
    return q.model_copy(update={"question": redact(q.question, values)}) if values else q


async def run_baselines(
    ctx: RunContext[Config],
    units: list[KnowledgeUnit],
    candidates: list[tuple[CandidateConfig, SystemUnderTest]],
    chunks: dict[str, Chunk],
) -> dict[str, dict[str, BaselineOutcome]]:
    """Run the per-unit baseline; returns candidate -> unit_id -> outcome."""
    cfg = ctx.settings
    examiner = ctx.role("examiner")
    version = prompt_version(PROMPT)

    def passage(u: KnowledgeUnit) -> str:
        chunk = chunks.get(u.chunk_id or "")
        return chunk.text if chunk is not None else (u.evidence or u.description)

    by_id = {u.unit_id: u for u in units}
    tasks = [
        QuestionTask(
            (u.unit_id, passage(u), u.keyword, u.description),
            {"passage": passage(u), "keyword": u.keyword, "description": u.description},
            seed=ctx.config.seed,
            source_chunk_ids=list(u.chunk_ids),
            unit_id=u.unit_id,
        )
        for u in units
    ]
    written = await write_questions(
        ctx,
        tasks,
        model=examiner,
        prompt=PROMPT,
        prompt_version=version,
        max_tokens=cfg.baseline_question_max_tokens,
        output=BaselineQuestion,
        role=ROLES["question"],
        description="baseline: per-unit questions",
        tidy=lambda text: " ".join(text.split()),
        finish=lambda t, q: _blank_leaks(q, by_id[t.unit_id or ""]),
    )
    questions = {o.unit.unit_id: o.value for o in written if o.value is not None}

    answer_tasks = [
        AnswerTask(cand, q)
        for _, cand in candidates
        for u in units
        if (q := questions.get(u.unit_id)) is not None
    ]
    answers = await answer_questions(
        ctx, answer_tasks, output=BaselineAnswer, role=ROLES["answer"], description="baseline: answers"
    )
    answer_of = {(o.unit.candidate.name, o.unit.question.question_id): o.key for o in answers}
    answered = {o.key: o.value for o in answers if o.value is not None}

    scores: dict[str, dict[str, float | None]] = {k: {} for k in answered}
    judges: list[JudgeKind] = [k for k in JUDGE_NAMES if f"judge_{k}" in cfg.baselines]
    if judges:
        judge = ctx.role("judge")
        for kind in judges:
            name = JUDGE_NAMES[kind]
            for o in await judge_answers(
                ctx,
                list(answered.items()),
                kind=kind,
                model=judge,
                role=ROLES[name],
                description=f"baseline: judge {kind.replace('_', ' ')}",
                guards=cfg.guards,
            ):
                scores[o.key][name] = o.value.score if o.value is not None else None

    # Classic metrics (no model calls).
    keys = list(answered)
    preds = [answered[k].answer for k in keys]
    refs = [answered[k].reference_answer for k in keys]
    classic: dict[str, list[float]] = {}
    if "bleu" in cfg.baselines:
        classic["bleu"] = bleu_scores(preds, refs)
    if "rouge_l" in cfg.baselines:
        classic["rouge_l"] = rouge_l_scores(preds, refs)
    if "embedding" in cfg.baselines:
        classic["embedding"] = embedding_scores(ctx.embedder, preds, refs)
    for name, values in classic.items():  # score-only judgments, no model call
        for scored in await ctx.judge(
            f"baseline: {name}",
            list(zip(keys, values, strict=True)),
            _score,
            item_key=lambda unit: unit[0],
            judge=name,
            role=None,
        ):
            scores[scored.key][name] = scored.value.score if scored.value is not None else None

    out: dict[str, dict[str, BaselineOutcome]] = {c.name: {} for _, c in candidates}
    for _, cand in candidates:
        for u in units:
            q = questions.get(u.unit_id)
            akey = answer_of.get((cand.name, q.question_id)) if q is not None else None
            out[cand.name][u.unit_id] = BaselineOutcome(akey, scores.get(akey or "", {}))
    return out


async def _score(unit: tuple[str, float]) -> Judgment:
    """A classic metric's score of an answer, computed beforehand, as a score-only judgment."""
    return Judgment(score=unit[1])


def bleu_scores(preds: list[str], refs: list[str]) -> list[float]:
    """Sentence BLEU in [0, 1] (sacrebleu's default exponential smoothing)."""
    try:
        import sacrebleu
    except ImportError:  # pragma: no cover - dependency declared by the project
        raise UserError(
            "reckon.baselines: 'bleu' needs sacrebleu; run `pip install sacrebleu` or drop 'bleu'."
        ) from None
    return [
        round(float(sacrebleu.sentence_bleu(p, [r]).score) / 100.0, 6)
        for p, r in zip(preds, refs, strict=True)
    ]


def rouge_l_scores(preds: list[str], refs: list[str]) -> list[float]:
    """ROUGE-L F-measure with Porter stemming."""
    try:
        from rouge_score import rouge_scorer
    except ImportError:  # pragma: no cover - dependency declared by the project
        raise UserError(
            "reckon.baselines: 'rouge_l' needs rouge-score; run `pip install rouge-score` or drop 'rouge_l'."
        ) from None
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return [round(float(scorer.score(r, p)["rougeL"].fmeasure), 6) for p, r in zip(preds, refs, strict=True)]


def embedding_scores(embedder: Embedder, preds: list[str], refs: list[str]) -> list[float]:
    """Cosine similarity of answer and reference embeddings (rows are unit-normalised)."""
    if not preds:
        return []
    a = embedder.embed(preds)
    b = embedder.embed(refs)
    return [round(float(x), 6) for x in np.sum(a * b, axis=1)]
