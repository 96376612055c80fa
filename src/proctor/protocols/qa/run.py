"""The qa protocol: questions from chunks -> candidates answer -> EM/F1 and LLM judges -> estimates."""

from __future__ import annotations

from typing import Any, ClassVar

from proctor.estimates import Estimate
from proctor.prompts import prompt_version
from proctor.protocols.context import RunContext, successes, work_key
from proctor.protocols.qa.config import Config
from proctor.protocols.shared.answers import AnswerItem, AnswerTask, answer_questions
from proctor.protocols.shared.judges import JUDGE_NAMES, Panel, judge_answers
from proctor.protocols.shared.questions import (
    GenerationStats,
    Question,
    QuestionTask,
    keep_questions,
    write_questions,
)
from proctor.protocols.steps import Judgment, Outcome

PROMPT = "qa/generate"

Verdicts = dict[str, dict[str, Judgment]]  # answer key -> judge name -> judgment
JudgeFailures = set[tuple[str, str]]  # (answer key, judge name)


class QaAnswer(AnswerItem):
    """An answer with the LLM verdicts copied on, so exports carry them beside the answer."""

    KIND: ClassVar[str] = "answer"
    judge_with_reference: dict[str, Any] | None = None
    judge_without_reference: dict[str, Any] | None = None


async def run(ctx: RunContext[Config]) -> dict[str, Any]:
    questions, gen_stats = await _questions(ctx)
    answers = await _answers(ctx, questions)
    verdicts, judge_failures = await _judge(ctx, answers)
    return _summary(ctx, answers, verdicts, judge_failures, gen_stats)


async def _questions(ctx: RunContext[Config]) -> tuple[list[Question], GenerationStats]:
    """One question per sampled chunk (chunks reused, with a variant number, when there are fewer)."""
    chunks = ctx.corpus.chunks
    examiner = ctx.role("examiner")
    version = prompt_version(PROMPT)
    order = ctx.rng.permutation(len(chunks))
    tasks = []
    for i in range(ctx.settings.num_questions):
        chunk = chunks[int(order[i % len(chunks)])]
        variant = i // len(chunks)
        key = work_key("q", chunk.chunk_id, variant, version, examiner.provider.identity(), ctx.config.seed)
        tasks.append(
            QuestionTask(
                key,
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
    kept, stats = keep_questions(outcomes)
    ctx.store.put_artifact("generation_stats", stats.model_dump())
    return kept, stats


async def _answers(ctx: RunContext[Config], questions: list[Question]) -> list[Outcome[AnswerTask, QaAnswer]]:
    tasks = [
        AnswerTask(work_key("a", *ctx.candidate_identity(c), q.question_id), ctx.candidate(c), q)
        for c in ctx.config.candidates
        for q in questions
    ]
    return await answer_questions(ctx, tasks, output=QaAnswer)


async def _judge(
    ctx: RunContext[Config], answers: list[Outcome[AnswerTask, QaAnswer]]
) -> tuple[Verdicts, JudgeFailures]:
    """EM and F1 as score-only judgments, then each configured LLM judge; verdicts are copied onto the
    answer items so exports carry them."""
    answered = [(o.key, o.value) for o in answers if o.value is not None]
    for key, a in answered:
        ctx.store.put_judgment(key, "em", verdict=None, score=a.em, reason=None)
        ctx.store.put_judgment(key, "f1", verdict=None, score=a.f1, reason=None)
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
    for key, a in answered:
        mine = verdicts.get(key, {})
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
        ctx.store.put_item(key, QaAnswer.KIND, a.model_copy(update=update).model_dump(mode="json"))
    return verdicts, failures


def _summary(
    ctx: RunContext[Config],
    answers: list[Outcome[AnswerTask, QaAnswer]],
    verdicts: Verdicts,
    judge_failures: JudgeFailures,
    gen_stats: GenerationStats,
) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "protocol": "qa",
        "config_hash": ctx.config.config_hash(),
        "questions": gen_stats.model_dump(),
        "candidates": {},
    }
    for ccfg in ctx.config.candidates:
        mine = [o for o in answers if o.unit.candidate.name == ccfg.name]
        ok = [o for o in mine if o.value is not None]
        res: dict[str, Any] = {
            "model": ctx.candidate_label(ccfg),
            "retriever": ccfg.retriever,
            "questions": len(mine),
            "answered": len(ok),
            "answer_errors": len(mine) - len(ok),
        }
        for kind in ctx.settings.judges:
            name = JUDGE_NAMES[kind]
            scores = [j.score for o in ok if (j := verdicts.get(o.key, {}).get(name)) and j.score is not None]
            acc = Estimate.proportion(int(sum(scores)), len(scores))
            ctx.store.put_metric(f"accuracy.{name}", ccfg.name, acc.value, lo=acc.lo, hi=acc.hi, n=acc.n)
            res[f"accuracy_{kind}"] = {
                **acc.model_dump(),
                "judge_errors": sum(1 for o in ok if (o.key, name) in judge_failures),
            }
        values = successes(ok)
        for metric in ("em", "f1"):
            est = Estimate.mean([getattr(a, metric) for a in values], bounds=(0.0, 1.0))
            ctx.store.put_metric(f"{metric}.mean", ccfg.name, est.value, lo=est.lo, hi=est.hi, n=est.n)
            res[metric] = est.model_dump()
        if len(ctx.settings.judges) == 2:
            pairs = [verdicts.get(o.key, {}) for o in ok]
            both = [
                (p[JUDGE_NAMES["with_reference"]].verdict, p[JUDGE_NAMES["without_reference"]].verdict)
                for p in pairs
                if len(p) == 2 and all(j.verdict for j in p.values())
            ]
            agree = sum(1 for a, b in both if a == b) / len(both) if both else None
            ctx.store.put_metric("judge_agreement", ccfg.name, agree, n=len(both))
            res["judge_agreement"] = agree
        summary["candidates"][ccfg.name] = res
    summary["table"] = [_table_row(name, r, ctx.settings) for name, r in summary["candidates"].items()]
    if gen_stats.kept == 0:
        summary["warnings"] = ["no question survived generation and filtering; see the report's errors"]
    return summary


def _table_row(name: str, r: dict[str, Any], settings: Config) -> dict[str, str]:
    """The console row: answered, accuracy under each configured judge, F1."""
    row = {"candidate": name, "answered": f"{r['answered']}/{r['questions']}"}
    for kind, title in (
        ("with_reference", "acc (judge w/ ref)"),
        ("without_reference", "acc (judge w/o ref)"),
    ):
        if kind in settings.judges:
            row[title] = Estimate.model_validate(r[f"accuracy_{kind}"]).text()
    f1v = r["f1"]["value"]
    row["F1"] = "—" if f1v is None else f"{f1v:.2f}"
    return row
