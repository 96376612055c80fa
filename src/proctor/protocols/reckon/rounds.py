"""Step 6: rounds. Each candidate starts with every unit pending; a round clusters the candidate's pending
units (at most `max_cluster_size` per cluster), asks one question per cluster, and judges every asked unit.
Units judged correct or incorrect leave the pool; uncovered units (and units whose question, answer,
extraction or judgment failed) are re-clustered and re-asked next round. So is, once, a unit a guard
judged incorrect because the answer's excerpt states nothing of its kind (no number where the unit has
one, nothing beyond the question: status "absent"): a long cluster answer often passes over a fact the
candidate knows, and the method's later rounds exist to ask it again. In a candidate's last round (the
round limit, or a stop) such a unit stays incorrect.

A question must name its units' subjects (`questions.missing_subjects`). With `left_out: list` (the
default) the question itself names the subjects the examiner left out, so nothing is split here. With
`left_out: split` the examiner is re-asked once, and the units a question still leaves out are split off
into a cluster of their own, which gets its own question (a question that names none of its units has its
cluster cut in two instead), at most `SPLIT_PASSES` times; units still not named after that are asked
anyway and count as *off topic*.

A candidate stops when

* every unit is judged ("all_judged"),
* a round whose questions named all their units judges nothing new and finds no unit unaddressed
  ("no_progress"), or
* it has had `max_rounds` rounds ("max_rounds").

A round that judged nothing while some of its questions were off topic is not the end: the candidate's
next round clusters its pending units with half the target size.

Candidates whose pending sets (and target sizes) are identical share clusters and questions (round 1
always does), so a question is written once and its cost counted once. Clustering the union of all
candidates' pending units instead would share more questions but spread each candidate's units over more
clusters, and a candidate's answer and extraction per cluster cost more than the question. Everything is
keyed by content, so a resumed or repeated run walks the same rounds from the store and the call cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from proctor.candidates import SystemUnderTest
from proctor.clustering import cluster
from proctor.config import CandidateConfig
from proctor.ids import content_id
from proctor.kit.context import RunContext
from proctor.kit.steps import Outcome, Payload
from proctor.protocols.reckon.candidates import answer_cluster_question
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.judging import (
    NO_SENTENCE,
    Extraction,
    JudgeJob,
    UnitVerdict,
    extract_jobs,
    run_extraction,
    run_judging,
)
from proctor.protocols.reckon.questions import ClusterQuestion, cluster_id, generate_questions
from proctor.protocols.reckon.result import RoundLog
from proctor.protocols.reckon.units import KnowledgeUnit

ANSWER_ROLE = "reckon:answer"
JUDGED = ("correct", "incorrect")
# A unit whose answer did not address it (a guard's `absent` finding): pending, asked again next round.
ABSENT = "absent"
SPLIT_PASSES = 2
STOP_REASONS = {
    "all_judged": "every unit judged",
    "no_progress": "a round whose questions were on topic judged nothing new",
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
    target: int
    rounds: list[RoundLog] = field(default_factory=list)
    stop_reason: str | None = None


@dataclass
class RoundsResult:
    candidates: dict[str, CandidateRounds]
    round1: list[tuple[str, list[str]]]  # (question key, unit ids) of the round-1 clusters, shared by all
    questions: dict[str, ClusterQuestion]  # every question written, by key
    answers: dict[str, ClusterAnswer]  # every answer given, by key
    verdicts: dict[str, UnitVerdict]  # every unit verdict, by key, in round order


@dataclass(frozen=True)
class Planned:
    """A candidate to answer a question about some units; `cluster` names the cluster it was asked for."""

    candidate: SystemUnderTest
    question: ClusterQuestion
    units: list[KnowledgeUnit]
    cluster: str


def _seed(base: int, round_no: int, unit_ids: list[str]) -> int:
    return (base + int(content_id(round_no, unit_ids)[-8:], 16)) % (2**31 - 1)


def _clusters_for(
    cfg: Config,
    units_by_id: dict[str, KnowledgeUnit],
    index: dict[str, int],
    vectors: np.ndarray,
    ids: list[str],
    seed: int,
    target: int | None = None,
    cap: int | None = None,
) -> list[list[KnowledgeUnit]]:
    """Clusters of the units `ids`. A target below the configured one (a candidate whose off-topic round
    judged nothing, or a cluster cut in two) is also the cap."""
    rows = [index[u] for u in ids]
    target = target or cfg.target_cluster_size
    if cap is None:
        cap = cfg.cluster_cap if target >= cfg.target_cluster_size else min(cfg.cluster_cap, target)
    groups = cluster(
        vectors[rows],
        target=target,
        cap=cap,
        method=cfg.cluster_method,
        selection=cfg.k_selection,
        minibatch_above=cfg.minibatch_above,
        seed=seed,
    )
    return [[units_by_id[ids[i]] for i in g] for g in groups]


@dataclass
class QuestionPlan:
    """A round's questions after the on-topic check, by cluster id (`questions.cluster_id`): for each
    cluster it was given, the clusters its units ended up in; per cluster, its question's key (also when
    the question failed), its question and the units it asks about; the units of off-topic questions."""

    parts: dict[str, list[str]]
    keys: dict[str, str]
    questions: dict[str, ClusterQuestion]
    units: dict[str, list[KnowledgeUnit]]
    off_topic: dict[str, set[str]]


async def plan_questions(
    ctx: RunContext[Config],
    round_no: int,
    clusters: dict[str, list[KnowledgeUnit]],
    split: Callable[[list[KnowledgeUnit]], list[list[KnowledgeUnit]]],
) -> QuestionPlan:
    """Write a question per cluster; units a question does not name are split off into a cluster of their
    own that gets its own question (`split` cuts a cluster whose question names none of its units), for at
    most SPLIT_PASSES passes. A cluster whose question failed keeps its key (its units become errors)."""
    origin = {k: k for k in clusters}
    parts: dict[str, list[str]] = {k: [] for k in clusters}
    keys: dict[str, str] = {}
    questions: dict[str, ClusterQuestion] = {}
    units: dict[str, list[KnowledgeUnit]] = {}
    off_topic: dict[str, set[str]] = {}
    todo = dict(clusters)
    for depth in range(SPLIT_PASSES + 1):
        if not todo:
            break
        written = await generate_questions(ctx, round_no, todo)
        nxt: dict[str, list[KnowledgeUnit]] = {}
        for key, group in todo.items():
            keys[key] = written[key].key
            q = written[key].value
            missing = [u for u in group if q is not None and u.unit_id in q.missing]
            if q is None or not missing or len(group) == 1 or depth == SPLIT_PASSES:
                parts[origin[key]].append(key)
                units[key] = group
                if q is not None:
                    questions[key] = q
                    if missing:
                        off_topic[key] = {u.unit_id for u in missing}
                continue
            named = [u for u in group if u.unit_id not in q.missing]
            if named:
                parts[origin[key]].append(key)
                units[key] = named
                questions[key] = q
                pieces = [missing]
            else:
                pieces = split(group)
            for piece in pieces:
                k = cluster_id(round_no, [u.unit_id for u in piece])
                nxt[k] = piece
                origin[k] = origin[key]
        todo = nxt
    return QuestionPlan(parts, keys, questions, units, off_topic)


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
    result = {
        c.name: CandidateRounds(c.name, {uid: UnitState() for uid in order}, cfg.target_cluster_size)
        for _, c in candidates
    }
    active = list(candidates)
    round1: list[tuple[str, list[str]]] = []
    for round_no in range(1, cfg.max_rounds + 1):
        if not active:
            break
        # Each candidate's pending units are clustered on their own, so its questions stay compact (its
        # answers and extractions, per cluster, cost more than writing a question); candidates with the
        # same pending set and target size share the clusters and questions (round 1 always does).
        clusters: dict[str, list[KnowledgeUnit]] = {}
        mine: dict[str, list[str]] = {}  # candidate -> its clusters' keys
        by_pending: dict[tuple[tuple[str, ...], int], list[str]] = {}
        for _, cand in active:
            cr = result[cand.name]
            pending = [uid for uid in order if cr.states[uid].status not in JUDGED]
            sig = (tuple(pending), cr.target)
            if sig not in by_pending:
                seed = _seed(base_seed, round_no, pending)
                groups = _clusters_for(cfg, units_by_id, index, vectors, pending, seed, target=cr.target)
                keyed = {cluster_id(round_no, [u.unit_id for u in g]): g for g in groups}
                by_pending[sig] = list(keyed)
                clusters.update(keyed)
            mine[cand.name] = by_pending[sig]

        def halve(group: list[KnowledgeUnit], round_no: int = round_no) -> list[list[KnowledgeUnit]]:
            ids = [u.unit_id for u in group]
            half = (len(group) + 1) // 2
            seed = _seed(base_seed, round_no, ids)
            return _clusters_for(cfg, units_by_id, index, vectors, ids, seed, target=half, cap=half)

        plan = await plan_questions(ctx, round_no, clusters, halve)
        if round_no == 1:
            round1 = [
                (plan.keys[cid], [u.unit_id for u in plan.units[cid]])
                for k in clusters
                for cid in plan.parts[k]
            ]
        questions = plan.questions
        all_questions.update({q.question_id: q for q in questions.values()})
        asked = {name: [cid for k in keys for cid in plan.parts[k]] for name, keys in mine.items()}

        # Answers.
        answer_plan = [
            Planned(cand, questions[cid], plan.units[cid], cid)
            for _, cand in active
            for cid in asked[cand.name]
            if cid in questions
        ]
        answered = {
            (o.unit.candidate.name, o.unit.cluster): o for o in await _answer(ctx, round_no, answer_plan)
        }
        answers = {o.key: o for o in answered.values() if o.value is not None}
        all_answers.update({k: a for k, o in answers.items() if (a := o.value) is not None})

        # Stage 1: extraction (the answer's sentences about each unit, selected by number).
        jobs = [
            job
            for akey, o in answers.items()
            if o.value is not None
            for job in extract_jobs(ctx, akey, o.value.answer, o.unit.units)
        ]
        selected: dict[
            tuple[str, str], Extraction
        ] = {}  # (answer key, unit id) -> the extraction covering it
        for job, extraction in await run_extraction(ctx, round_no, jobs):
            for u in job.units:
                selected[(job.answer_key, u.unit_id)] = extraction

        # Stage 2: judging (units with sentences selected); units with none are uncovered without a call, and
        # with `judge_mode: with_extract` units keep the stage-1 call's verdict (realigned ones are judged).
        judge_jobs = []
        for akey, o in answers.items():
            a = o.value
            assert a is not None
            for u in o.unit.units:
                uid = u.unit_id
                ex = selected.get((akey, uid))
                if ex is None:
                    continue
                ids = ex.sentence_ids.get(uid, [])
                draft = UnitVerdict(
                    candidate=a.candidate,
                    round=round_no,
                    question_id=a.question_id,
                    answer_key=akey,
                    unit_id=uid,
                    excerpt=ex.excerpts.get(uid, ""),
                    sentence_ids=ids,
                )
                settled = None if ids else NO_SENTENCE
                given = ex.verdict_for(uid) if ids else None  # with_extract: the stage-1 call's verdict
                judge_jobs.append(JudgeJob(draft, u, settled, a.question, given))
        verdicts = await run_judging(ctx, round_no, judge_jobs)
        all_verdicts.update({o.key: v for o in verdicts.values() if (v := o.value) is not None})

        # Update every active candidate's unit states and decide who stops.
        still = []
        for ccfg, cand in active:
            cr = result[cand.name]
            new = {"correct": 0, "incorrect": 0, "uncovered": 0, "error": 0, "absent": 0}
            n_asked = 0
            off_topic = 0
            this_round: list[UnitState] = []
            for cid in asked[cand.name]:
                ao = answered.get((cand.name, cid))
                for u in plan.units[cid]:
                    st = cr.states[u.unit_id]
                    st.asked += 1
                    n_asked += 1
                    off_topic += u.unit_id in plan.off_topic.get(cid, set())
                    status, state_key = "error", None
                    vo = verdicts.get((ao.key, u.unit_id)) if ao is not None and ao.ok else None
                    if vo is not None:
                        state_key = vo.key
                        v = vo.value
                        if v is not None and v.verdict in new:
                            status = v.verdict
                            if status == "incorrect" and v.absent and ABSENT not in st.history:
                                status = ABSENT  # not addressed by the answer: asked again, once
                    st.status, st.round, st.verdict_key = status, round_no, state_key
                    st.history.append(status)
                    this_round.append(st)
                    new[status] += 1
            remaining = sum(1 for s in cr.states.values() if s.status not in JUDGED)
            judged_new = new["correct"] + new["incorrect"]
            target = cr.target
            stop = None
            if remaining == 0:
                stop = "all_judged"
            elif judged_new == 0 and not new[ABSENT] and not off_topic:
                stop = "no_progress"
            elif round_no == cfg.max_rounds:
                stop = "max_rounds"
            elif judged_new == 0:  # off topic, or nothing addressed: smaller clusters next round
                cr.target = max(1, cr.target // 2)
            if stop:  # no round left to ask them again: their verdict, "incorrect", stands
                for st in this_round:
                    if st.status == ABSENT:
                        st.status, st.history[-1] = "incorrect", "incorrect"
                        new[ABSENT] -= 1
                        new["incorrect"] += 1
                judged_new = new["correct"] + new["incorrect"]
                remaining = sum(1 for s in cr.states.values() if s.status not in JUDGED)
            log = RoundLog(
                candidate=cand.name,
                round=round_no,
                asked=n_asked,
                questions=len(asked[cand.name]),
                off_topic=off_topic,
                cluster_target=target,
                judged_new=judged_new,
                correct_new=new["correct"],
                incorrect_new=new["incorrect"],
                uncovered=new["uncovered"],
                asked_again=new[ABSENT],
                errors=new["error"],
                remaining_after=remaining,
                stop_reason=stop,
            )
            cr.rounds.append(log)
            if stop:
                cr.stop_reason = stop
            else:
                still.append((ccfg, cand))
        active = still
    logs = [log for cr in result.values() for log in cr.rounds]
    await ctx.map("reckon: round logs", logs, _same, unit_id=lambda log: log, role=None, output=RoundLog)
    return RoundsResult(result, round1, all_questions, all_answers, all_verdicts)


async def _same(log: RoundLog) -> RoundLog:
    return log


async def _answer(
    ctx: RunContext[Config], round_no: int, plan: list[Planned]
) -> list[Outcome[Planned, ClusterAnswer]]:
    """Every planned (candidate, question, units asked); returns each one's outcome."""

    def base(unit: Planned) -> dict[str, Any]:
        q = unit.question
        return {
            "candidate": unit.candidate.name,
            "round": round_no,
            "question_id": q.question_id,
            "question": q.question,
            "center": q.center,
            "question_type": q.question_type,
            "unit_ids": [u.unit_id for u in unit.units],
        }

    async def answer(unit: Planned) -> ClusterAnswer:
        gold = sorted({cid for u in unit.units for cid in u.chunk_ids})
        text, retrieved_ids = await answer_cluster_question(unit.candidate, unit.question.question, gold)
        return ClusterAnswer(**base(unit), answer=text, retrieved_ids=retrieved_ids)

    return await ctx.map(
        f"reckon round {round_no}: answers",
        plan,
        answer,
        unit_id=lambda u: (u.candidate.name, u.question),
        role=ANSWER_ROLE,
        output=ClusterAnswer,
        context=base,
    )
