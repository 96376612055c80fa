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
from typing import Any, ClassVar

import numpy as np

from proctor.candidates import SystemUnderTest
from proctor.clustering import cluster
from proctor.config import CandidateConfig
from proctor.protocols.context import RunContext, work_key
from proctor.protocols.reckon.candidates import answer_cluster_question
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.judging import (
    JudgeJob,
    UnitVerdict,
    extract_jobs,
    is_not_mentioned,
    overlap,
    run_extraction,
    run_judging,
    verdict_key,
)
from proctor.protocols.reckon.questions import ClusterQuestion, generate_questions, question_key
from proctor.protocols.reckon.units import KnowledgeUnit
from proctor.protocols.steps import Payload

ANSWER_ROLE = "reckon:answer"
JUDGED = ("correct", "incorrect")
STOP_REASONS = {
    "all_judged": "every unit judged",
    "no_progress": "a round judged nothing new",
    "max_rounds": "round limit reached",
}


class ClusterAnswer(Payload):
    """A candidate's reply to a cluster question (with the passages a RAG candidate retrieved)."""

    KIND: ClassVar[str] = "reckon_answer"
    candidate: str
    round: int
    question_id: str
    question: str
    center: str
    question_type: str
    unit_ids: list[str]
    answer: str
    retrieved_ids: list[str]


class RoundLog(Payload):
    KIND: ClassVar[str] = "reckon_round"
    candidate: str
    round: int
    asked: int
    questions: int
    judged_new: int
    correct_new: int
    incorrect_new: int
    uncovered: int
    errors: int
    remaining_after: int
    stop_reason: str | None


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
    rounds: list[RoundLog] = field(default_factory=list)
    stop_reason: str | None = None


@dataclass
class RoundsResult:
    candidates: dict[str, CandidateRounds]
    round1: list[tuple[str, list[str]]]  # (question key, unit ids) of the round-1 clusters, shared by all
    questions: dict[str, ClusterQuestion]  # every question written, by key
    answers: dict[str, ClusterAnswer]  # every answer given, by key
    verdicts: dict[str, UnitVerdict]  # every unit verdict, by key, in round order


def _seed(base: int, round_no: int, unit_ids: list[str]) -> int:
    return (base + int(work_key("seed", round_no, unit_ids)[-8:], 16)) % (2**31 - 1)


def answer_key(ctx: RunContext[Config], ccfg: CandidateConfig, question_key: str) -> str:
    # The candidate identity is one part of the key (a list), as it has always been: keys stay stable.
    return work_key("ra", ctx.candidate_identity(ccfg), ctx.settings.answer_max_tokens, question_key)


def _clusters_for(
    cfg: Config,
    units_by_id: dict[str, KnowledgeUnit],
    index: dict[str, int],
    vectors: np.ndarray,
    ids: list[str],
    seed: int,
) -> list[list[KnowledgeUnit]]:
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
    ctx: RunContext[Config],
    units: list[KnowledgeUnit],
    vectors: np.ndarray,
    candidates: list[tuple[CandidateConfig, SystemUnderTest]],
    base_seed: int,
) -> RoundsResult:
    cfg = ctx.settings
    order = [u.unit_id for u in units]
    all_questions: dict[str, ClusterQuestion] = {}
    all_answers: dict[str, ClusterAnswer] = {}
    all_verdicts: dict[str, UnitVerdict] = {}
    units_by_id = {u.unit_id: u for u in units}
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
        clusters: dict[str, list[KnowledgeUnit]] = {}
        mine: dict[str, dict[str, list[KnowledgeUnit]]] = {}
        by_pending: dict[tuple[str, ...], dict[str, list[KnowledgeUnit]]] = {}
        for _, cand in active:
            pending = [uid for uid in order if result[cand.name].states[uid].status not in JUDGED]
            sig = tuple(pending)
            if sig not in by_pending:
                groups = _clusters_for(
                    cfg, units_by_id, index, vectors, pending, _seed(base_seed, round_no, pending)
                )
                by_pending[sig] = {question_key(ctx, round_no, [u.unit_id for u in g]): g for g in groups}
                clusters.update(by_pending[sig])
            mine[cand.name] = by_pending[sig]
        if round_no == 1:
            round1 = [(qk, [u.unit_id for u in g]) for qk, g in clusters.items()]
        questions = await generate_questions(ctx, round_no, clusters)
        all_questions.update(questions)

        # Answers.
        answer_plan: list[tuple[str, SystemUnderTest, ClusterQuestion]] = []
        targets: dict[str, list[KnowledgeUnit]] = {}  # answer key -> the candidate's units to judge
        for ccfg, cand in active:
            for qk, units_here in mine[cand.name].items():
                if qk not in questions:
                    continue
                akey = answer_key(ctx, ccfg, qk)
                answer_plan.append((akey, cand, questions[qk]))
                targets[akey] = units_here
        answers = await _answer(ctx, round_no, answer_plan, clusters)
        all_answers.update(answers)

        # Stage 1: extraction.
        jobs = [
            job for akey, a in answers.items() for job in extract_jobs(ctx, akey, a.answer, targets[akey])
        ]
        extracted = await run_extraction(ctx, round_no, jobs)
        excerpts: dict[str, dict[str, str]] = {}
        failed_extract: dict[str, set[str]] = {}
        for job in jobs:
            if job.key in extracted:
                excerpts.setdefault(job.answer_key, {}).update(extracted[job.key].excerpts)
            else:
                failed_extract.setdefault(job.answer_key, set()).update(u.unit_id for u in job.units)

        # Stage 2: judging (units with an excerpt found in the answer); uncovered ones need no call.
        judge_jobs = []
        for akey, a in answers.items():
            for u in targets[akey]:
                uid = u.unit_id
                if uid in failed_extract.get(akey, set()) or uid not in excerpts.get(akey, {}):
                    continue
                excerpt = excerpts[akey][uid]
                share = overlap(excerpt, a.answer)
                draft = UnitVerdict(
                    candidate=a.candidate,
                    round=round_no,
                    question_id=a.question_id,
                    answer_key=akey,
                    unit_id=uid,
                    excerpt=excerpt,
                    overlap=round(share, 4),
                )
                uncovered = None
                if is_not_mentioned(excerpt):
                    uncovered = "not mentioned in the answer"
                elif share < cfg.excerpt_min_overlap:
                    uncovered = f"excerpt not found in the answer ({share:.0%} of its word pairs)"
                judge_jobs.append(JudgeJob(verdict_key(ctx, akey, uid), draft, u, uncovered))
        verdicts = await run_judging(ctx, round_no, judge_jobs)
        all_verdicts.update(verdicts)

        # Update every active candidate's unit states and decide who stops.
        still = []
        for ccfg, cand in active:
            cr = result[cand.name]
            new = {"correct": 0, "incorrect": 0, "uncovered": 0, "error": 0}
            n_asked = 0
            for qk, units_here in mine[cand.name].items():
                akey = answer_key(ctx, ccfg, qk)
                for u in units_here:
                    st = cr.states[u.unit_id]
                    st.asked += 1
                    n_asked += 1
                    status, state_key = "error", None
                    if akey in answers:
                        state_key = verdict_key(ctx, akey, u.unit_id)
                        v = verdicts.get(state_key)
                        if v is not None and v.verdict in new:
                            status = v.verdict
                    st.status, st.round, st.verdict_key = status, round_no, state_key
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
            log = RoundLog(
                candidate=cand.name,
                round=round_no,
                asked=n_asked,
                questions=len(mine[cand.name]),
                judged_new=judged_new,
                correct_new=new["correct"],
                incorrect_new=new["incorrect"],
                uncovered=new["uncovered"],
                errors=new["error"],
                remaining_after=remaining,
                stop_reason=stop,
            )
            cr.rounds.append(log)
            ctx.store.put_item(
                work_key("rr", cand.name, round_no), RoundLog.KIND, log.model_dump(mode="json")
            )
            if stop:
                cr.stop_reason = stop
            else:
                still.append((ccfg, cand))
        active = still
    return RoundsResult(result, round1, all_questions, all_answers, all_verdicts)


async def _answer(
    ctx: RunContext[Config],
    round_no: int,
    plan: list[tuple[str, SystemUnderTest, ClusterQuestion]],
    clusters: dict[str, list[KnowledgeUnit]],
) -> dict[str, ClusterAnswer]:
    """Every planned (answer key, candidate, question); returns the answers given, by key."""

    def base(unit: tuple[str, SystemUnderTest, ClusterQuestion]) -> dict[str, Any]:
        _, cand, q = unit
        return {
            "candidate": cand.name,
            "round": round_no,
            "question_id": q.question_id,
            "question": q.question,
            "center": q.center,
            "question_type": q.question_type,
            "unit_ids": q.unit_ids,
        }

    async def answer(unit: tuple[str, SystemUnderTest, ClusterQuestion]) -> ClusterAnswer:
        _, cand, q = unit
        gold = sorted({cid for u in clusters[q.question_id] for cid in u.chunk_ids})
        text, retrieved_ids = await answer_cluster_question(cand, q.question, gold)
        return ClusterAnswer(**base(unit), answer=text, retrieved_ids=retrieved_ids)

    outcomes = await ctx.map(
        f"reckon round {round_no}: answers",
        plan,
        answer,
        key=lambda u: u[0],
        role=ANSWER_ROLE,
        output=ClusterAnswer,
        context=base,
    )
    return {o.key: o.value for o in outcomes if o.value is not None}
