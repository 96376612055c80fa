"""The qa protocol: questions from chunks -> candidates answer -> EM/F1 and LLM judges -> estimates."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

from proctor.errors import UserError
from proctor.estimates import Estimate
from proctor.kit.context import RunContext, successes
from proctor.kit.shared.answers import AnswerItem, AnswerTask, answer_questions
from proctor.kit.shared.hotpotqa import corpus_chunks, first_per_level
from proctor.kit.shared.judges import JUDGE_NAMES, Panel, judge_answers
from proctor.kit.shared.question_file import load_questions
from proctor.kit.shared.questions import (
    GenerationStats,
    Question,
    QuestionTask,
    keep_questions,
    write_questions,
)
from proctor.kit.steps import Judgment, Outcome
from proctor.prompts import prompt_version
from proctor.protocols.qa.config import Config
from proctor.protocols.qa.result import Disagreement, JudgedAccuracy, QaCandidate, QaResult

PROMPT = "qa/generate"
FILE_PROMPT = "file"  # the prompt_version of a question read from a file: no prompt wrote it

Verdicts = dict[str, dict[str, Judgment]]  # answer key -> judge name -> judgment
JudgeFailures = set[tuple[str, str]]  # (answer key, judge name)


class QaAnswer(AnswerItem):
    """An answer with the LLM verdicts copied on, so exports carry them beside the answer."""

    KIND: ClassVar[str] = "answer"
    judge_with_reference: dict[str, Any] | None = None
    judge_without_reference: dict[str, Any] | None = None


async def run(ctx: RunContext[Config]) -> QaResult:
    questions, gen_stats = await _questions(ctx)
    answers = await _answers(ctx, questions)
    verdicts, judge_failures = await _judge(ctx, answers)
    return _summary(ctx, answers, verdicts, judge_failures, gen_stats)


async def _questions(ctx: RunContext[Config]) -> tuple[list[Question], GenerationStats]:
    """One question per sampled chunk (chunks reused, with a variant number, when there are fewer), or the
    questions of the configured file."""
    if ctx.settings.questions is not None:
        return _file_questions(ctx)
    chunks = ctx.corpus.chunks
    examiner = ctx.role("examiner")
    version = prompt_version(PROMPT)
    order = ctx.rng.permutation(len(chunks))
    tasks = []
    for i in range(ctx.settings.num_questions):
        chunk = chunks[int(order[i % len(chunks)])]
        variant = i // len(chunks)
        tasks.append(
            QuestionTask(
                (chunk.chunk_id, variant, ctx.config.seed),
                {"passage": chunk.text, "variant": variant},
                seed=ctx.config.seed + variant,
                source_chunk_ids=[chunk.chunk_id],
                source=chunk.source,
            )
        )
    outcomes = await write_questions(
        ctx,
        tasks,
        model=examiner,
        prompt=PROMPT,
        prompt_version=version,
        max_tokens=ctx.settings.question_max_tokens,
        output=Question,
    )
    return keep_questions(outcomes)


def _file_questions(ctx: RunContext[Config]) -> tuple[list[Question], GenerationStats]:
    """The file's short-answer questions, the file's answer as the reference (multiple-choice records are
    skipped and counted). A HotpotQA-format file with no `corpus.path` is also the corpus."""
    cfg = ctx.settings
    assert cfg.questions is not None
    loaded, stats = load_questions(cfg.questions, section="qa.questions")
    short = [q for q in loaded if not q.multiple_choice]
    if cfg.questions_per_level is not None:
        picked = first_per_level(short, cfg.questions_per_level, lambda q: q.difficulty)
    else:
        picked = short[: cfg.num_questions]
    if ctx.config.corpus.path is None:
        chunks = corpus_chunks(Path(cfg.questions.path), "qa.questions.path")
        if not chunks:
            raise UserError(
                f"qa.questions: {cfg.questions.path} holds no HotpotQA-style context paragraphs, and the "
                "config sets no corpus.path. Set corpus.path to the documents the candidates retrieve from."
            )
        ctx.use_corpus(chunks)
    questions = [
        Question(
            question_id=q.question_id,
            question=q.question,
            reference_answer=q.answer,
            prompt_version=FILE_PROMPT,
            source=q.source,
        )
        for q in picked
    ]
    filtered = {**stats["skipped"], "multiple choice": len(loaded) - len(short)}
    filtered["not in the slice"] = len(short) - len(picked)
    return questions, GenerationStats(
        planned=len(picked),
        generated=len(picked),
        filtered={k: v for k, v in filtered.items() if v},
        kept=len(questions),
    )


async def _answers(ctx: RunContext[Config], questions: list[Question]) -> list[Outcome[AnswerTask, QaAnswer]]:
    tasks = [AnswerTask(ctx.candidate(c), q) for c in ctx.config.candidates for q in questions]
    return await answer_questions(ctx, tasks, output=QaAnswer)


async def _judge(
    ctx: RunContext[Config], answers: list[Outcome[AnswerTask, QaAnswer]]
) -> tuple[Verdicts, JudgeFailures]:
    """EM and F1 as score-only judgments, then each configured LLM judge; verdicts are copied onto the
    answer items so exports carry them."""
    answered = [(o.key, o.value) for o in answers if o.value is not None]
    for metric in ("em", "f1"):
        await ctx.judge(
            f"scoring ({metric})",
            answered,
            _lexical(metric),
            item_key=lambda unit: unit[0],
            judge=metric,
            role=None,
        )
    verdicts: Verdicts = {}
    failures: JudgeFailures = set()
    if not ctx.settings.judges:
        return verdicts, failures
    panel = Panel.from_config(ctx, ctx.role("judge"), ctx.settings.judge_panel, field="qa.judge_panel")
    rules = ctx.settings.equivalence_rules
    guards = ctx.settings.guards
    for kind in ctx.settings.judges:
        for o in await judge_answers(ctx, answered, kind=kind, model=panel, rules=rules, guards=guards):
            if o.value is not None:
                verdicts.setdefault(o.key, {})[JUDGE_NAMES[kind]] = o.value
            else:
                failures.add((o.key, JUDGE_NAMES[kind]))

    def with_verdicts(o: Outcome[AnswerTask, QaAnswer]) -> QaAnswer:
        assert o.value is not None
        mine = verdicts.get(o.key, {})
        update = {
            f"judge_{kind}": (
                {
                    "verdict": j.verdict,
                    "reason": j.reason,
                    "method": (j.data or {}).get("method"),
                    "p_correct": (j.data or {}).get("p_correct"),
                }
                if (j := mine.get(JUDGE_NAMES[kind]))
                else None
            )
            for kind in ctx.settings.judges
        }
        return o.value.model_copy(update=update)

    await ctx.revise(answers, with_verdicts)
    return verdicts, failures


def _lexical(metric: str) -> Callable[[tuple[str, QaAnswer]], Awaitable[Judgment]]:
    """EM or F1 of an answer as a score-only judgment (computed when the answer was stored)."""

    async def score(unit: tuple[str, QaAnswer]) -> Judgment:
        return Judgment(score=unit[1].em if metric == "em" else unit[1].f1)

    return score


F1_CUT = 0.5  # F1 at or above it counts as "correct" when set against the judge
MAX_DISAGREEMENT_EXAMPLES = 5  # per candidate


def judge_f1_disagreement(pairs: list[tuple[float, float]]) -> Estimate:
    """Share of (judge score, F1) pairs where the judge's verdict (score >= 0.5: correct) and F1 >= 0.5
    differ: how often token overlap and the judge tell different stories about the same answers."""
    differ = sum(1 for judge, f1 in pairs if (judge >= 0.5) != (f1 >= F1_CUT))
    return Estimate.proportion(differ, len(pairs))


def _disagreements(
    name: str, ok: list[Outcome[AnswerTask, QaAnswer]], verdicts: Verdicts
) -> tuple[Estimate | None, list[Disagreement]]:
    judge = JUDGE_NAMES["with_reference"]
    judged = [
        (o.value, j)
        for o in ok
        if o.value is not None and (j := verdicts.get(o.key, {}).get(judge)) and j.score is not None
    ]
    if not judged:
        return None, []
    share = judge_f1_disagreement([(float(j.score or 0.0), a.f1) for a, j in judged])
    examples = [
        Disagreement(
            candidate=name,
            question=a.question,
            reference=a.reference_answer,
            answer=a.answer,
            f1=round(a.f1, 4),
            verdict=j.verdict or ("correct" if (j.score or 0.0) >= 0.5 else "incorrect"),
            method=(j.data or {}).get("method"),
        )
        for a, j in judged
        if (float(j.score or 0.0) >= 0.5) != (a.f1 >= F1_CUT)
    ]
    return share, examples[:MAX_DISAGREEMENT_EXAMPLES]


def _summary(
    ctx: RunContext[Config],
    answers: list[Outcome[AnswerTask, QaAnswer]],
    verdicts: Verdicts,
    judge_failures: JudgeFailures,
    gen_stats: GenerationStats,
) -> QaResult:
    candidates: dict[str, QaCandidate] = {}
    examples: list[Disagreement] = []
    for ccfg in ctx.config.candidates:
        mine = [o for o in answers if o.unit.candidate.name == ccfg.name]
        ok = [o for o in mine if o.value is not None]
        accuracy: dict[str, JudgedAccuracy] = {}
        for kind in ctx.settings.judges:
            name = JUDGE_NAMES[kind]
            scores = [j.score for o in ok if (j := verdicts.get(o.key, {}).get(name)) and j.score is not None]
            acc = Estimate.proportion(int(sum(scores)), len(scores))
            errors = sum(1 for o in ok if (o.key, name) in judge_failures)
            accuracy[f"accuracy_{kind}"] = JudgedAccuracy(**acc.model_dump(), judge_errors=errors)
        values = successes(ok)
        agreement = None
        if len(ctx.settings.judges) == 2:
            pairs = [verdicts.get(o.key, {}) for o in ok]
            both = [
                (p[JUDGE_NAMES["with_reference"]].verdict, p[JUDGE_NAMES["without_reference"]].verdict)
                for p in pairs
                if len(p) == 2 and all(j.verdict for j in p.values())
            ]
            agreement = sum(1 for a, b in both if a == b) / len(both) if both else None
        disagreement, mine_examples = _disagreements(ccfg.name, ok, verdicts)
        examples += mine_examples
        candidates[ccfg.name] = QaCandidate(
            model=ctx.candidate_label(ccfg),
            retriever=ccfg.retriever,
            questions=len(mine),
            answered=len(ok),
            answer_errors=len(mine) - len(ok),
            em=Estimate.mean([a.em for a in values], bounds=(0.0, 1.0)),
            f1=Estimate.mean([a.f1 for a in values], bounds=(0.0, 1.0)),
            judge_agreement=agreement,
            judge_f1_disagreement=disagreement,
            **accuracy,
        )
    return QaResult(
        questions=gen_stats,
        candidates=candidates,
        disagreements=examples,
        table=[_table_row(name, r, ctx.settings) for name, r in candidates.items()],
        warnings=_generation_warnings(gen_stats),
    )


def _generation_warnings(stats: GenerationStats) -> list[str]:
    """Say when fewer questions were kept than planned, and why, so a small `n` is never a surprise."""
    if stats.kept == 0:
        return ["no question survived generation and filtering; see the report's errors"]
    if stats.kept >= stats.planned:
        return []
    why = [f"{n} filtered as {reason}" for reason, n in sorted(stats.filtered.items())]
    why += [f"{stats.failed} failed"] if stats.failed else []
    dropped = ", ".join(why) or "fewer generated"
    return [
        f"{stats.kept} of {stats.planned} planned questions kept ({dropped}); the estimates rest on those. "
        "The report's question statistics list what was dropped."
    ]


def _table_row(name: str, r: QaCandidate, settings: Config) -> dict[str, str]:
    """The console row: answered, accuracy under each configured judge, F1."""
    row = {"candidate": name, "answered": f"{r.answered}/{r.questions}"}
    for kind, title in (
        ("with_reference", "acc (judge w/ ref)"),
        ("without_reference", "acc (judge w/o ref)"),
    ):
        acc = r.accuracy_with_reference if kind == "with_reference" else r.accuracy_without_reference
        if kind in settings.judges and acc is not None:
            row[title] = acc.text()
    row["F1"] = "—" if r.f1.value is None else f"{r.f1.value:.2f}"
    return row
