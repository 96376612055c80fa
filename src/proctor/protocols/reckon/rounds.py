"""Step 6: rounds. Each candidate starts with every unit pending; a round clusters the candidate's pending
units, asks one question per cluster, and judges every asked unit. Units judged correct or incorrect
leave the pool; uncovered units (and units whose question, answer, extraction or judgment failed) are
re-clustered and re-asked next round. A candidate stops when

* every unit is judged ("all_judged"),
* a round judges nothing new ("no_progress"), or
* it has had `max_rounds` rounds ("max_rounds").

Candidates whose pending sets are identical share clusters and questions (round 1 always does), so a
question is written once and its cost counted once. Clustering the union of all candidates' pending
units instead would share more questions but spread each candidate's units over more clusters, and a
candidate's answer and extraction per cluster cost more than the question. Everything is keyed by
content, so a resumed or repeated run walks the same rounds from the store and the call cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from proctor.candidates import Candidate
from proctor.clustering import cluster
from proctor.config import CandidateConfig
from proctor.errors import ModelCallError
from proctor.protocols.base import RunContext, work_key
from proctor.protocols.reckon.candidates import answer_cluster_question, candidate_identity
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.judging import (
    JudgeJob,
    extract_jobs,
    is_not_mentioned,
    overlap,
    run_extraction,
    run_judging,
    verdict_key,
)
from proctor.protocols.reckon.questions import generate_questions, question_key

ANSWER_ROLE = "reckon:answer"
JUDGED = ("correct", "incorrect")
STOP_REASONS = {
    "all_judged": "every unit judged",
    "no_progress": "a round judged nothing new",
    "max_rounds": "round limit reached",
}


@dataclass
class UnitState:
    status: str | None = None  # None, correct, incorrect, uncovered, error
    round: int | None = None
    verdict_key: str | None = None
    asked: int = 0
    history: list[str] = field(default_factory=list)


@dataclass
class CandidateRounds:
    name: str
    states: dict[str, UnitState]
    rounds: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None


@dataclass
class RoundsResult:
    candidates: dict[str, CandidateRounds]
    round1: list[tuple[str, list[str]]]  # (question key, unit ids) of the round-1 clusters, shared by all


def _seed(base: int, round_no: int, unit_ids: list[str]) -> int:
    return (base + int(work_key("seed", round_no, unit_ids)[-8:], 16)) % (2**31 - 1)


def _clusters_for(
    cfg: Config,
    units_by_id: dict[str, dict],
    index: dict[str, int],
    vectors: np.ndarray,
    ids: list[str],
    seed: int,
) -> list[list[dict[str, Any]]]:
    rows = [index[u] for u in ids]
    groups = cluster(
        vectors[rows],
        target=cfg.target_cluster_size,
        cap=cfg.cluster_cap,
        method=cfg.cluster_method,
        selection=cfg.k_selection,
        minibatch_above=cfg.minibatch_above,
        seed=seed,
    )
    return [[units_by_id[ids[i]] for i in g] for g in groups]


async def run_rounds(
    ctx: RunContext,
    cfg: Config,
    units: list[dict[str, Any]],
    vectors: np.ndarray,
    candidates: list[tuple[CandidateConfig, Candidate]],
    base_seed: int,
) -> RoundsResult:
    order = [u["unit_id"] for u in units]
    units_by_id = {u["unit_id"]: u for u in units}
    index = {uid: i for i, uid in enumerate(order)}
    result = {c.name: CandidateRounds(c.name, {uid: UnitState() for uid in order}) for _, c in candidates}
    active = list(candidates)
    round1: list[tuple[str, list[str]]] = []
    for round_no in range(1, cfg.max_rounds + 1):
        if not active:
            break
        # Each candidate's pending units are clustered on their own, so its questions stay compact (its
        # answers and extractions, per cluster, cost more than writing a question); candidates with the
        # same pending set share the clusters and questions (round 1 always does).
        clusters: dict[str, list[dict[str, Any]]] = {}
        mine: dict[str, dict[str, list[dict[str, Any]]]] = {}
        by_pending: dict[tuple[str, ...], dict[str, list[dict[str, Any]]]] = {}
        for _, cand in active:
            pending = [uid for uid in order if result[cand.name].states[uid].status not in JUDGED]
            sig = tuple(pending)
            if sig not in by_pending:
                groups = _clusters_for(
                    cfg, units_by_id, index, vectors, pending, _seed(base_seed, round_no, pending)
                )
                by_pending[sig] = {question_key(ctx, round_no, [u["unit_id"] for u in g]): g for g in groups}
                clusters.update(by_pending[sig])
            mine[cand.name] = by_pending[sig]
        if round_no == 1:
            round1 = [(qk, [u["unit_id"] for u in g]) for qk, g in clusters.items()]
        await generate_questions(ctx, cfg, round_no, clusters)

        # Answers.
        answer_plan: list[tuple[str, CandidateConfig, Candidate, dict[str, Any]]] = []
        targets: dict[str, list[dict[str, Any]]] = {}  # answer key -> the candidate's units to judge
        for ccfg, cand in active:
            for qk, units_here in mine[cand.name].items():
                q = ctx.store.get_item(qk)
                if q is None or q["status"] != "done":
                    continue
                akey = work_key("ra", candidate_identity(ctx, ccfg), cfg.answer_max_tokens, qk)
                answer_plan.append((akey, ccfg, cand, q["data"]))
                targets[akey] = units_here
        await _answer(ctx, round_no, answer_plan, clusters)

        # Stage 1: extraction.
        jobs = []
        answers: dict[str, dict[str, Any]] = {}
        for akey, _, _, _ in answer_plan:
            it = ctx.store.get_item(akey)
            if it is not None and it["status"] == "done":
                answers[akey] = it["data"]
                jobs.extend(extract_jobs(ctx, cfg, akey, it["data"]["answer"], targets[akey]))
        await run_extraction(ctx, cfg, round_no, jobs)
        excerpts: dict[str, dict[str, str]] = {}
        failed_extract: dict[str, set[str]] = {}
        for job in jobs:
            it = ctx.store.get_item(job.key)
            if it is not None and it["status"] == "done":
                excerpts.setdefault(job.answer_key, {}).update(it["data"]["excerpts"])
            else:
                failed_extract.setdefault(job.answer_key, set()).update(u["unit_id"] for u in job.units)

        # Stage 2: judging (units with an excerpt found in the answer); uncovered ones need no call.
        judge_jobs = []
        for akey, a in answers.items():
            for u in targets[akey]:
                uid = u["unit_id"]
                if uid in failed_extract.get(akey, set()) or uid not in excerpts.get(akey, {}):
                    continue
                excerpt = excerpts[akey][uid]
                share = overlap(excerpt, a["answer"])
                vkey = verdict_key(ctx, cfg, akey, uid)
                base = {
                    "candidate": a["candidate"],
                    "round": round_no,
                    "question_id": a["question_id"],
                    "answer_key": akey,
                    "unit_id": uid,
                    "excerpt": excerpt,
                    "overlap": round(share, 4),
                }
                if is_not_mentioned(excerpt):
                    ctx.store.put_item(
                        vkey,
                        "reckon_verdict",
                        {
                            **base,
                            "verdict": "uncovered",
                            "reason": "not mentioned in the answer",
                            "stage": "extract",
                        },
                    )
                elif share < cfg.excerpt_min_overlap:
                    ctx.store.put_item(
                        vkey,
                        "reckon_verdict",
                        {
                            **base,
                            "verdict": "uncovered",
                            "reason": f"excerpt not found in the answer ({share:.0%} of its word pairs)",
                            "stage": "extract",
                        },
                    )
                else:
                    judge_jobs.append(JudgeJob(vkey, base, u))
        await run_judging(ctx, cfg, round_no, judge_jobs)

        # Update every active candidate's unit states and decide who stops.
        still = []
        for ccfg, cand in active:
            cr = result[cand.name]
            new = {"correct": 0, "incorrect": 0, "uncovered": 0, "error": 0}
            n_asked = 0
            for qk, units_here in mine[cand.name].items():
                akey = work_key("ra", candidate_identity(ctx, ccfg), cfg.answer_max_tokens, qk)
                for u in units_here:
                    st = cr.states[u["unit_id"]]
                    st.asked += 1
                    n_asked += 1
                    status, vkey = "error", None
                    if akey in answers:
                        vkey = verdict_key(ctx, cfg, akey, u["unit_id"])
                        v = ctx.store.get_item(vkey)
                        if v is not None and v["status"] == "done" and v["data"]["verdict"] in new:
                            status = v["data"]["verdict"]
                    st.status, st.round, st.verdict_key = status, round_no, vkey
                    st.history.append(status)
                    new[status] += 1
            remaining = sum(1 for s in cr.states.values() if s.status not in JUDGED)
            judged_new = new["correct"] + new["incorrect"]
            stop = None
            if remaining == 0:
                stop = "all_judged"
            elif judged_new == 0:
                stop = "no_progress"
            elif round_no == cfg.max_rounds:
                stop = "max_rounds"
            log = {
                "candidate": cand.name,
                "round": round_no,
                "asked": n_asked,
                "questions": len(mine[cand.name]),
                "judged_new": judged_new,
                "correct_new": new["correct"],
                "incorrect_new": new["incorrect"],
                "uncovered": new["uncovered"],
                "errors": new["error"],
                "remaining_after": remaining,
                "stop_reason": stop,
            }
            cr.rounds.append(log)
            ctx.store.put_item(work_key("rr", cand.name, round_no), "reckon_round", log)
            if stop:
                cr.stop_reason = stop
            else:
                still.append((ccfg, cand))
        active = still
    return RoundsResult(result, round1)


async def _answer(
    ctx: RunContext,
    round_no: int,
    plan: list[tuple[str, CandidateConfig, Candidate, dict[str, Any]]],
    clusters: dict[str, list[dict[str, Any]]],
) -> None:
    info = {k: (ccfg, cand, q) for k, ccfg, cand, q in plan}

    def base(cand: Candidate, q: dict[str, Any]) -> dict[str, Any]:
        return {
            "candidate": cand.name,
            "round": round_no,
            "question_id": q["question_id"],
            "question": q["question"],
            "center": q["center"],
            "question_type": q["question_type"],
            "unit_ids": q["unit_ids"],
        }

    def make(key: str) -> Any:
        _, cand, q = info[key]

        async def fn() -> None:
            gold = sorted({cid for u in clusters[q["question_id"]] for cid in u["chunk_ids"]})
            out = await answer_cluster_question(cand, q["question"], gold)
            ctx.store.put_item(key, "reckon_answer", {**base(cand, q), **out})

        return fn

    def on_error(key: str, e: ModelCallError) -> None:
        _, cand, q = info[key]
        ctx.store.put_failed(key, "reckon_answer", base(cand, q), e)

    await ctx.run_items(
        f"reckon round {round_no}: answers",
        ((k, ANSWER_ROLE, make(k)) for k in info),
        is_done=ctx.store.is_settled,
        on_error=on_error,
    )
