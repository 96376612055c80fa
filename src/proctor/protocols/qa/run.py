"""The qa protocol's steps: questions -> answers -> judgments -> metrics."""

from __future__ import annotations

import math
import re
from typing import Any

from proctor.candidates import Candidate
from proctor.errors import ModelCallError
from proctor.judging import exact_match, f1, judge_with_reference, judge_without_reference
from proctor.judging.stats import mean_ci, wilson_interval
from proctor.prompts import prompt_version, render_messages
from proctor.protocols.base import RunContext, work_key
from proctor.protocols.qa.config import Config

QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 8},
        "answer": {"type": "string", "minLength": 1},
    },
    "required": ["question", "answer"],
}

NOT_SELF_CONTAINED = re.compile(
    r"\b(according to|in|from|based on) (the|this) (text|passage|document|article|excerpt|reference)\b"
    r"|\bthe (text|passage|excerpt) (says|states|mentions)\b",
    re.IGNORECASE,
)

JUDGES = {
    "with_reference": ("llm_with_reference", judge_with_reference),
    "without_reference": ("llm_without_reference", judge_without_reference),
}


def _settings(ctx: RunContext) -> Config:
    return ctx.config.settings  # type: ignore[return-value]


def _finite(v: float) -> float | None:
    return None if v is None or math.isnan(v) else float(v)


def _normalise_question(q: str) -> str:
    return re.sub(r"\W+", " ", q.lower()).strip()


async def _generate_questions(ctx: RunContext) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    cfg = _settings(ctx)
    chunks = ctx.corpus.chunks
    examiner = ctx.role("examiner")
    version = prompt_version("qa/generate")
    order = ctx.rng.permutation(len(chunks))
    plan = []
    for i in range(cfg.num_questions):
        chunk = chunks[int(order[i % len(chunks)])]
        variant = i // len(chunks)
        key = work_key("q", chunk.chunk_id, variant, version, examiner.provider.identity(), ctx.config.seed)
        plan.append((key, chunk, variant))

    def make(key: str, chunk: Any, variant: int) -> Any:
        async def fn() -> None:
            messages = render_messages("qa/generate", passage=chunk.text, variant=variant)
            c = await examiner.generate(
                messages,
                json_schema=QUESTION_SCHEMA,
                temperature=0.0,
                seed=ctx.config.seed + variant,
                max_tokens=cfg.question_max_tokens,
            )
            ctx.store.put_item(
                key,
                "question",
                {
                    "question_id": key,
                    "question": c.parsed["question"].strip(),
                    "reference_answer": c.parsed["answer"].strip(),
                    "source_chunk_ids": [chunk.chunk_id],
                    "source": chunk.source,
                    "generator": examiner.spec,
                    "prompt_version": version,
                },
            )

        return fn

    def on_error(key: str, e: ModelCallError) -> None:
        ctx.store.put_failed(key, "question", {"question_id": key}, e)

    await ctx.run_items(
        "writing questions",
        ((key, "examiner", make(key, chunk, variant)) for key, chunk, variant in plan),
        is_done=ctx.store.is_done,
        on_error=on_error,
    )
    # Filters, applied in plan order so the kept set is deterministic.
    stats: dict[str, Any] = {"planned": len(plan), "generated": 0, "failed": 0, "filtered": {}, "kept": 0}
    kept: list[dict[str, Any]] = []
    seen: set[str] = set()
    for key, _, _ in plan:
        it = ctx.store.get_item(key)
        if it is None or it["status"] != "done":
            stats["failed"] += 1
            continue
        stats["generated"] += 1
        q = it["data"]
        reason = None
        if NOT_SELF_CONTAINED.search(q["question"]):
            reason = "not_self_contained"
        elif _normalise_question(q["question"]) in seen:
            reason = "duplicate"
        if reason:
            stats["filtered"][reason] = stats["filtered"].get(reason, 0) + 1
            continue
        seen.add(_normalise_question(q["question"]))
        kept.append(q)
    stats["kept"] = len(kept)
    ctx.store.put_artifact("generation_stats", stats)
    return kept, stats


async def _answer(ctx: RunContext, questions: list[dict[str, Any]]) -> list[str]:
    candidates = [ctx.candidate(c) for c in ctx.config.candidates]
    plan = []
    for cand, ccfg in zip(candidates, ctx.config.candidates, strict=True):
        for q in questions:
            key = work_key(
                "a", ccfg.model_dump(), ctx.models[ccfg.model].provider.identity(), q["question_id"]
            )
            plan.append((key, cand, q))

    def make(key: str, cand: Candidate, q: dict[str, Any]) -> Any:
        async def fn() -> None:
            ans = await cand.answer(q["question"], gold_ids=q["source_chunk_ids"])
            ctx.store.put_item(
                key,
                "answer",
                {
                    "candidate": cand.name,
                    "question_id": q["question_id"],
                    "question": q["question"],
                    "answer": ans.text,
                    "reference_answer": q["reference_answer"],
                    "retrieved_ids": ans.context_ids,
                    "em": exact_match(ans.text, q["reference_answer"]),
                    "f1": f1(ans.text, q["reference_answer"]),
                    "judge_with_reference": None,
                    "judge_without_reference": None,
                },
            )

        return fn

    info = {key: (cand, q) for key, cand, q in plan}

    def on_error(key: str, e: ModelCallError) -> None:
        cand, q = info[key]
        ctx.store.put_failed(
            key,
            "answer",
            {
                "candidate": cand.name,
                "question_id": q["question_id"],
                "question": q["question"],
                "reference_answer": q["reference_answer"],
            },
            e,
        )

    await ctx.run_items(
        "answering",
        ((key, "candidate", make(key, cand, q)) for key, cand, q in plan),
        is_done=ctx.store.is_done,
        on_error=on_error,
    )
    return [key for key, _, _ in plan]


async def _judge(ctx: RunContext, answer_keys: list[str]) -> None:
    judge = ctx.role("judge")
    answers = [
        it for k in answer_keys if (it := ctx.store.get_item(k)) is not None and it["status"] == "done"
    ]
    for it in answers:
        ctx.store.put_judgment(it["key"], "em", verdict=None, score=it["data"]["em"], reason=None)
        ctx.store.put_judgment(it["key"], "f1", verdict=None, score=it["data"]["f1"], reason=None)
    existing = {(j["item_key"], j["judge"]): j for j in ctx.store.judgments()}

    def done(key: str) -> bool:
        # Unparseable replies are final (a re-run would read the same cached reply); transient
        # failures are retried on resume.
        j = existing.get(tuple(key.split("|", 1)))  # type: ignore[arg-type]
        return j is not None and (j["error"] is None or j["error"].startswith("unparseable"))

    plan = []
    for it in answers:
        d = it["data"]
        for kind in _settings(ctx).judges:
            name, fn = JUDGES[kind]
            plan.append((f"{it['key']}|{name}", it, kind, name, fn, d))

    def make(it: dict[str, Any], kind: str, name: str, fn: Any, d: dict[str, Any]) -> Any:
        async def run() -> None:
            kwargs = {"question": d["question"], "answer": d["answer"]}
            if kind == "with_reference":
                kwargs["reference"] = d["reference_answer"]
            v = await fn(judge, **kwargs)
            ctx.store.put_judgment(
                it["key"], name, verdict=v.verdict, score=1.0 if v.correct else 0.0, reason=v.reason
            )

        return run

    def on_error(key: str, e: ModelCallError) -> None:
        item_key, name = key.split("|", 1)
        ctx.store.put_judgment(item_key, name, verdict=None, score=None, reason=None, error=f"{e.cause}: {e}")

    await ctx.run_items(
        "judging",
        ((key, "judge", make(it, kind, name, fn, d)) for key, it, kind, name, fn, d in plan),
        is_done=done,
        on_error=on_error,
    )
    # Copy verdicts onto the answer items so exports carry them.
    by_item: dict[str, dict[str, Any]] = {}
    for j in ctx.store.judgments():
        by_item.setdefault(j["item_key"], {})[j["judge"]] = j
    for it in answers:
        d = dict(it["data"])
        for kind in _settings(ctx).judges:
            name = JUDGES[kind][0]
            j = by_item.get(it["key"], {}).get(name)
            d[f"judge_{kind}"] = (
                None if j is None or j["error"] else {"verdict": j["verdict"], "reason": j["reason"]}
            )
        ctx.store.put_item(it["key"], "answer", d)


def _metrics(ctx: RunContext, answer_keys: list[str], gen_stats: dict[str, Any]) -> dict[str, Any]:
    judgments: dict[str, dict[str, Any]] = {}
    for j in ctx.store.judgments():
        judgments.setdefault(j["item_key"], {})[j["judge"]] = j
    summary: dict[str, Any] = {
        "protocol": "qa",
        "config_hash": ctx.config.config_hash(),
        "questions": gen_stats,
        "candidates": {},
    }
    # Plan order, not completion order: sums of floats must not depend on which call finished first.
    order = {k: i for i, k in enumerate(answer_keys)}
    items = sorted(
        (it for it in ctx.store.items("answer") if it["key"] in order), key=lambda it: order[it["key"]]
    )
    for ccfg in ctx.config.candidates:
        mine = [it for it in items if it["data"]["candidate"] == ccfg.name]
        ok = [it for it in mine if it["status"] == "done"]
        res: dict[str, Any] = {
            "model": ctx.config.models[ccfg.model].spec,
            "retriever": ccfg.retriever,
            "questions": len(mine),
            "answered": len(ok),
            "answer_errors": len(mine) - len(ok),
        }
        for kind in _settings(ctx).judges:
            name = JUDGES[kind][0]
            scores = [judgments.get(it["key"], {}).get(name) for it in ok]
            judged = [s["score"] for s in scores if s is not None and s["score"] is not None]
            errors = sum(1 for s in scores if s is not None and s["error"])
            k = int(sum(judged))
            lo, hi = wilson_interval(k, len(judged))
            value = k / len(judged) if judged else None
            ctx.store.put_metric(f"accuracy.{name}", ccfg.name, value, lo=lo, hi=hi, n=len(judged))
            res[f"accuracy_{kind}"] = {
                "value": value,
                "lo": lo,
                "hi": hi,
                "n": len(judged),
                "judge_errors": errors,
            }
        for metric in ("em", "f1"):
            vals = [float(it["data"][metric]) for it in ok]
            mean, lo, hi = (_finite(v) for v in mean_ci(vals)) if vals else (None, None, None)
            # EM and F1 live in [0, 1]; a t-interval on few items can spill over.
            lo, hi = (None if lo is None else max(0.0, lo)), (None if hi is None else min(1.0, hi))
            ctx.store.put_metric(f"{metric}.mean", ccfg.name, mean, lo=lo, hi=hi, n=len(vals))
            res[metric] = {"value": mean, "lo": lo, "hi": hi, "n": len(vals)}
        if len(_settings(ctx).judges) == 2:
            pairs = [
                (
                    judgments.get(it["key"], {}).get("llm_with_reference"),
                    judgments.get(it["key"], {}).get("llm_without_reference"),
                )
                for it in ok
            ]
            both = [
                (a["verdict"], b["verdict"]) for a, b in pairs if a and b and a["verdict"] and b["verdict"]
            ]
            agree = sum(1 for a, b in both if a == b) / len(both) if both else None
            ctx.store.put_metric("judge_agreement", ccfg.name, agree, n=len(both))
            res["judge_agreement"] = agree
        summary["candidates"][ccfg.name] = res
    summary["table"] = [_table_row(name, r) for name, r in summary["candidates"].items()]
    if gen_stats["kept"] == 0:
        summary["warnings"] = ["no question survived generation and filtering; see the report's errors"]
    return summary


def _table_row(name: str, r: dict[str, Any]) -> dict[str, str]:
    def acc(key: str) -> str:
        a = r.get(key) or {}
        if a.get("value") is None:
            return "—"
        return f"{a['value']:.2f} [{a['lo']:.2f}, {a['hi']:.2f}] n={a['n']}"

    f1v = (r.get("f1") or {}).get("value")
    return {
        "candidate": name,
        "answered": f"{r['answered']}/{r['questions']}",
        "acc (judge w/ ref)": acc("accuracy_with_reference"),
        "acc (judge w/o ref)": acc("accuracy_without_reference"),
        "F1": "—" if f1v is None else f"{f1v:.2f}",
    }


async def run(ctx: RunContext) -> dict[str, Any]:
    questions, gen_stats = await _generate_questions(ctx)
    answer_keys = await _answer(ctx, questions) if questions else []
    if _settings(ctx).judges:
        await _judge(ctx, answer_keys)
    return _metrics(ctx, answer_keys, gen_stats)
