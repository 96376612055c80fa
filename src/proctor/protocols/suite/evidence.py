"""Per-item correctness of each member run, read back from its run store, with the corpus chunks each
item came from. One scale for all members: an item is correct or not (its share is the mastery).

- qa: every answer, with the verdict of the first configured judge (`qa.judges`; exact match when none)
  on its question's `source_chunk_ids`;
- exam: every response of the pipeline that is a candidate (the candidate's own LLM, retriever and k at
  the fewest in-context examples; agent, Python and HTTP candidates by name) on its question's
  `source_chunk_ids`;
- reckon: every (candidate, unit) judged correct or incorrect (uncovered units have no verdict) on the
  unit's `chunk_ids`;
- interview: every answer to a base question (the option letter, or the judge with the reference for a
  short answer) on the question's `chunk_ids` — extension and validation questions come from knowledge
  paths of the graph and are left out.

Items without a verdict (failed answers, unparsed judge replies, uncovered units) are counted, not
scored. Other protocols run as members but give no evidence to the map.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proctor.config import RunConfig
from proctor.kit.steps import read_items
from proctor.store import RunStore


@dataclass(frozen=True)
class Evidence:
    """One judged item: whose, which corpus chunks it tests, and whether it was right."""

    candidate: str
    item: str
    chunk_ids: tuple[str, ...]
    correct: bool


@dataclass
class MemberEvidence:
    measure: str  # what "correct" means for this member
    items: list[Evidence] = field(default_factory=list)
    unjudged: int = 0  # items of a candidate without a verdict
    not_mapped: list[str] = field(default_factory=list)  # subjects that are not suite candidates
    supported: bool = True


Reader = Callable[[RunStore, RunConfig], MemberEvidence]


def _qa(store: RunStore, cfg: RunConfig) -> MemberEvidence:
    from proctor.protocols.qa.run import QaAnswer
    from proctor.kit.shared.judges import JUDGE_NAMES
    from proctor.kit.shared.questions import Question

    judges = getattr(cfg.settings, "judges", [])
    judge = JUDGE_NAMES[judges[0]] if judges else "em"
    measure = f"qa accuracy ({'judge ' + judges[0].replace('_', ' ') if judges else 'exact match'})"
    sources = {q.question_id: tuple(q.source_chunk_ids) for _, q in read_items(store, Question)}
    verdicts = {j["item_key"]: j for j in store.judgments() if j["judge"] == judge}
    out = MemberEvidence(measure)
    names = {c.name for c in cfg.candidates}
    for key, a in read_items(store, QaAnswer):
        if a.candidate not in names:
            continue
        j = verdicts.get(key)
        if j is None or j["error"] or j["score"] is None:
            out.unjudged += 1
            continue
        out.items.append(Evidence(a.candidate, key, sources.get(a.question_id, ()), j["score"] >= 1.0))
    out.unjudged += sum(
        1 for it in store.items(QaAnswer.KIND, status="error") if (it["data"] or {}).get("candidate") in names
    )
    return out


def _exam_subjects(store: RunStore, cfg: RunConfig) -> tuple[dict[str, str], list[str]]:
    """Pipeline name -> candidate name, and the pipelines that are no candidate (grid cells)."""
    pipelines: list[dict[str, Any]] = store.get_artifact("exam_pipelines") or []
    least_icl = min((p["icl"] for p in pipelines), default=0)
    of: dict[str, str] = {}
    for c in cfg.candidates:
        for p in pipelines:
            if p["name"] == c.name and p["retriever"] == "own":
                of[p["name"]] = c.name
            elif c.model is not None and c.agent is None and p["retriever"] != "own":
                same_k = p["retriever"] in ("closed_book", "oracle") or p["k"] == c.k
                if (p["model"], p["retriever"], p["icl"]) == (c.model, c.retriever, least_icl) and same_k:
                    of.setdefault(p["name"], c.name)
    return of, [p["name"] for p in pipelines if p["name"] not in of]


def _exam(store: RunStore, cfg: RunConfig) -> MemberEvidence:
    from proctor.protocols.exam.grading import ExamResponse

    sources = {
        it["data"]["id"]: tuple(it["data"].get("source_chunk_ids") or ())
        for it in store.items("exam_question", status="done")
    }
    candidate_of, others = _exam_subjects(store, cfg)
    out = MemberEvidence("exam accuracy (multiple choice)", not_mapped=others)
    for key, r in read_items(store, ExamResponse):
        cand = candidate_of.get(r.pipeline)
        if cand is None:
            continue
        if r.correct is None:
            out.unjudged += 1
            continue
        out.items.append(Evidence(cand, key, sources.get(r.question_id, ()), bool(r.correct)))
    for it in store.items(ExamResponse.KIND, status="error"):
        if candidate_of.get((it["data"] or {}).get("pipeline", "")):
            out.unjudged += 1
    return out


def _reckon(store: RunStore, cfg: RunConfig) -> MemberEvidence:
    from proctor.protocols.reckon.run import ReckonItem
    from proctor.protocols.reckon.units import KnowledgeUnit

    sources = {u.unit_id: tuple(u.chunk_ids) for _, u in read_items(store, KnowledgeUnit)}
    out = MemberEvidence("reckon unit accuracy (correct / judged units)")
    for key, it in read_items(store, ReckonItem):
        if it.status not in ("correct", "incorrect"):
            out.unjudged += 1
            continue
        out.items.append(Evidence(it.candidate, key, sources.get(it.unit_id, ()), it.status == "correct"))
    return out


def _interview(store: RunStore, cfg: RunConfig) -> MemberEvidence:
    from proctor.protocols.interview.answers import JUDGE, InterviewAnswer
    from proctor.protocols.interview.base import BaseQuestion

    sources = {q.question_id: tuple(q.chunk_ids) for _, q in read_items(store, BaseQuestion)}
    verdicts = {j["item_key"]: j for j in store.judgments() if j["judge"] == JUDGE}
    out = MemberEvidence("interview accuracy (base questions)")
    names = {c.name for c in cfg.candidates}
    for key, a in read_items(store, InterviewAnswer):
        if a.stage != "base" or a.candidate not in names:
            continue
        correct = a.correct
        if (
            correct is None
            and (j := verdicts.get(key)) is not None
            and not j["error"]
            and j["score"] is not None
        ):
            correct = j["score"] >= 1.0
        if correct is None:
            out.unjudged += 1
            continue
        out.items.append(Evidence(a.candidate, key, sources.get(a.question_id, ()), correct))
    return out


READERS: dict[str, Reader] = {"qa": _qa, "exam": _exam, "reckon": _reckon, "interview": _interview}


def member_evidence(store: RunStore, cfg: RunConfig) -> MemberEvidence:
    reader = READERS.get(cfg.protocol)
    if reader is None:
        return MemberEvidence(f"{cfg.protocol}: no per-item evidence for the map", supported=False)
    return reader(store, cfg)
