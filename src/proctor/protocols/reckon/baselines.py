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

from typing import Any

import numpy as np

from proctor.candidates import Candidate
from proctor.config import CandidateConfig
from proctor.corpus.types import Chunk
from proctor.errors import ModelCallError, UserError
from proctor.judging import judge_with_reference, judge_without_reference
from proctor.prompts import prompt_version, render_messages
from proctor.protocols.base import RunContext, work_key
from proctor.protocols.reckon.candidates import candidate_identity
from proctor.protocols.reckon.config import Config

PROMPT = "reckon/baseline_question"
JW_R = "llm_with_reference"
JW_OR = "llm_without_reference"
ROLES = {
    "question": "baseline:question",
    "answer": "baseline:answer",
    JW_R: "baseline:judge",
    JW_OR: "baseline:judge_noref",
}
QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 8},
        "answer": {"type": "string", "minLength": 1},
    },
    "required": ["question", "answer"],
}


def answer_key(ctx: RunContext, ccfg: CandidateConfig, qkey: str) -> str:
    return work_key("ba", candidate_identity(ctx, ccfg), qkey)


async def run_baselines(
    ctx: RunContext,
    cfg: Config,
    units: list[dict[str, Any]],
    candidates: list[tuple[CandidateConfig, Candidate]],
    chunks: dict[str, Chunk],
) -> dict[str, dict[str, dict[str, Any]]]:
    """Run the per-unit baseline; returns candidate -> unit_id -> outcome (answer key, verdicts, scores)."""
    examiner = ctx.role("examiner")
    judge = ctx.role("judge")
    version = prompt_version(PROMPT)
    qkeys = {
        u["unit_id"]: work_key(
            "bq", u["unit_id"], u["chunk_id"], version, examiner.provider.identity(), ctx.config.seed
        )
        for u in units
    }
    by_qkey = {qkeys[u["unit_id"]]: u for u in units}

    def passage(u: dict[str, Any]) -> str:
        chunk = chunks.get(u["chunk_id"] or "")
        return chunk.text if chunk is not None else (u.get("evidence") or u["description"])

    def make_q(key: str) -> Any:
        u = by_qkey[key]

        async def fn() -> None:
            messages = render_messages(
                PROMPT, passage=passage(u), keyword=u["keyword"], description=u["description"]
            )
            c = await examiner.generate(
                messages,
                json_schema=QUESTION_SCHEMA,
                temperature=0.0,
                seed=ctx.config.seed,
                max_tokens=cfg.baseline_question_max_tokens,
            )
            ctx.store.put_item(
                key,
                "baseline_question",
                {
                    "question_id": key,
                    "unit_id": u["unit_id"],
                    "question": " ".join(str(c.parsed["question"]).split()),
                    "reference_answer": " ".join(str(c.parsed["answer"]).split()),
                    "prompt_version": version,
                },
            )

        return fn

    def q_error(key: str, e: ModelCallError) -> None:
        ctx.store.put_failed(
            key, "baseline_question", {"question_id": key, "unit_id": by_qkey[key]["unit_id"]}, e
        )

    await ctx.run_items(
        "baseline: per-unit questions",
        ((k, ROLES["question"], make_q(k)) for k in by_qkey),
        is_done=ctx.store.is_settled,
        on_error=q_error,
    )
    questions = {}
    for uid, qk in qkeys.items():
        it = ctx.store.get_item(qk)
        if it is not None and it["status"] == "done":
            questions[uid] = it["data"]

    # Answers.
    plan: dict[str, tuple[CandidateConfig, Candidate, dict[str, Any], dict[str, Any]]] = {}
    for ccfg, cand in candidates:
        for u in units:
            q = questions.get(u["unit_id"])
            if q is not None:
                plan[answer_key(ctx, ccfg, q["question_id"])] = (ccfg, cand, q, u)

    def a_base(cand: Candidate, q: dict[str, Any]) -> dict[str, Any]:
        return {
            "candidate": cand.name,
            "unit_id": q["unit_id"],
            "question_id": q["question_id"],
            "question": q["question"],
            "reference_answer": q["reference_answer"],
        }

    def make_a(key: str) -> Any:
        _, cand, q, u = plan[key]

        async def fn() -> None:
            ans = await cand.answer(q["question"], gold_ids=u["chunk_ids"])
            ctx.store.put_item(
                key,
                "baseline_answer",
                {**a_base(cand, q), "answer": ans.text, "retrieved_ids": ans.context_ids},
            )

        return fn

    def a_error(key: str, e: ModelCallError) -> None:
        _, cand, q, _ = plan[key]
        ctx.store.put_failed(key, "baseline_answer", a_base(cand, q), e)

    await ctx.run_items(
        "baseline: answers",
        ((k, ROLES["answer"], make_a(k)) for k in plan),
        is_done=ctx.store.is_settled,
        on_error=a_error,
    )
    answered = {
        k: it["data"] for k in plan if (it := ctx.store.get_item(k)) is not None and it["status"] == "done"
    }

    # LLM judges.
    judges = [
        name
        for kind, name in (("judge_with_reference", JW_R), ("judge_without_reference", JW_OR))
        if kind in cfg.baselines
    ]
    existing = {(j["item_key"], j["judge"]): j for j in ctx.store.judgments() if j["item_key"] in answered}

    def j_done(key: str) -> bool:
        j = existing.get(tuple(key.rsplit("|", 1)))  # type: ignore[arg-type]
        return j is not None and (j["error"] is None or j["error"].startswith("unparseable"))

    def make_j(akey: str, name: str) -> Any:
        d = answered[akey]

        async def fn() -> None:
            if name == JW_R:
                v = await judge_with_reference(
                    judge, question=d["question"], answer=d["answer"], reference=d["reference_answer"]
                )
            else:
                v = await judge_without_reference(judge, question=d["question"], answer=d["answer"])
            ctx.store.put_judgment(
                akey, name, verdict=v.verdict, score=1.0 if v.correct else 0.0, reason=v.reason
            )

        return fn

    def j_error(key: str, e: ModelCallError) -> None:
        akey, name = key.rsplit("|", 1)
        ctx.store.put_judgment(akey, name, verdict=None, score=None, reason=None, error=f"{e.cause}: {e}")

    for name in judges:
        await ctx.run_items(
            f"baseline: {'judge with reference' if name == JW_R else 'judge without reference'}",
            ((f"{k}|{name}", ROLES[name], make_j(k, name)) for k in answered),
            is_done=j_done,
            on_error=j_error,
        )

    # Classic metrics (no model calls).
    keys = list(answered)
    preds = [answered[k]["answer"] for k in keys]
    refs = [answered[k]["reference_answer"] for k in keys]
    classic: dict[str, list[float]] = {}
    if "bleu" in cfg.baselines:
        classic["bleu"] = bleu_scores(preds, refs)
    if "rouge_l" in cfg.baselines:
        classic["rouge_l"] = rouge_l_scores(preds, refs)
    if "embedding" in cfg.baselines:
        classic["embedding"] = embedding_scores(ctx.embedder, preds, refs)
    for name, values in classic.items():
        for k, v in zip(keys, values, strict=True):
            ctx.store.put_judgment(k, name, verdict=None, score=v, reason=None)

    judged: dict[str, dict[str, dict[str, Any]]] = {}
    for j in ctx.store.judgments():
        judged.setdefault(j["item_key"], {})[j["judge"]] = j
    out: dict[str, dict[str, dict[str, Any]]] = {c.name: {} for _, c in candidates}
    for ccfg, cand in candidates:
        for u in units:
            q = questions.get(u["unit_id"])
            rec: dict[str, Any] = {"answer_key": None, "status": "no_question" if q is None else "error"}
            if q is not None:
                akey = answer_key(ctx, ccfg, q["question_id"])
                rec["answer_key"] = akey
                if akey in answered:
                    rec["status"] = "answered"
                    js = judged.get(akey, {})
                    for name in (*judges, *classic):
                        j = js.get(name)
                        rec[name] = None if j is None or j["error"] else j["score"]
            out[cand.name][u["unit_id"]] = rec
    return out


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


def embedding_scores(embedder: Any, preds: list[str], refs: list[str]) -> list[float]:
    """Cosine similarity of answer and reference embeddings (rows are unit-normalised)."""
    if not preds:
        return []
    a = embedder.embed(preds)
    b = embedder.embed(refs)
    return [round(float(x), 6) for x in np.sum(a * b, axis=1)]
