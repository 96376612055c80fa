"""Per-item correctness of each member run, read back through `load_run` (typed payloads and judgments),
with the corpus chunks each item came from. One scale for all members: an item is correct or not (its
share is the mastery).

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
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from proctor.config import RunConfig
from proctor.kit.record import Run
from proctor.store.record import ItemRecord

if TYPE_CHECKING:
    from proctor.protocols.exam.result import PipelineSpec


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


Reader = Callable[[Run], MemberEvidence]


class _FailedUnit(BaseModel):
    """What a failed item records of its unit (the step's context): whose it was."""

    model_config = ConfigDict(extra="ignore")

    candidate: str | None = None
    pipeline: str | None = None


def _failed(run: Run, kind: str) -> list[_FailedUnit]:
    def unit(it: ItemRecord) -> _FailedUnit:
        return _FailedUnit.model_validate(it.data) if isinstance(it.data, dict) else _FailedUnit()

    return [unit(it) for it in run.iter_items(kind, "error")]


def _verdicts(run: Run, judge: str) -> dict[str, bool | None]:
    """Item key -> the judge's verdict (None: the judgment failed or has no score)."""
    return {
        j.item_key: None if j.error or j.score is None else j.score >= 1.0
        for j in run.judgments()
        if j.judge == judge
    }


def _qa(run: Run) -> MemberEvidence:
    from proctor.kit.shared.judges import JUDGE_NAMES
    from proctor.kit.shared.questions import Question
    from proctor.protocols.qa.config import Config as QaConfig
    from proctor.protocols.qa.run import QaAnswer

    cfg = run.config
    judges = cfg.settings.judges if isinstance(cfg.settings, QaConfig) else []
    judge = JUDGE_NAMES[judges[0]] if judges else "em"
    measure = f"qa accuracy ({'judge ' + judges[0].replace('_', ' ') if judges else 'exact match'})"
    sources = {q.question_id: tuple(q.source_chunk_ids) for _, q in run.payloads(Question)}
    verdicts = _verdicts(run, judge)
    out = MemberEvidence(measure)
    names = _candidates(cfg)
    for key, a in run.payloads(QaAnswer):
        if a.candidate not in names:
            continue
        correct = verdicts.get(key)
        if correct is None:
            out.unjudged += 1
            continue
        out.items.append(Evidence(a.candidate, key, sources.get(a.question_id, ()), correct))
    out.unjudged += sum(1 for f in _failed(run, QaAnswer.KIND) if f.candidate in names)
    return out


def _exam_subjects(pipelines: list[PipelineSpec], cfg: RunConfig) -> tuple[dict[str, str], list[str]]:
    """Pipeline name -> candidate name, and the pipelines that are no candidate (grid cells)."""
    least_icl = min((p.icl for p in pipelines), default=0)
    of: dict[str, str] = {}
    for c in cfg.candidates:
        for p in pipelines:
            if p.name == c.name and p.retriever == "own":
                of[p.name] = c.name
            elif c.model is not None and c.agent is None and p.retriever != "own":
                same_k = p.retriever in ("closed_book", "oracle") or p.k == c.k
                if (p.model, p.retriever, p.icl) == (c.model, c.retriever, least_icl) and same_k:
                    of.setdefault(p.name, c.name)
    return of, [p.name for p in pipelines if p.name not in of]


def _exam(run: Run) -> MemberEvidence:
    from proctor.protocols.exam.exam_file import ExamQuestion
    from proctor.protocols.exam.grading import ExamResponse
    from proctor.protocols.exam.result import ExamPipelines

    sources = {q.id: tuple(q.source_chunk_ids) for _, q in run.payloads(ExamQuestion)}
    pipelines = run.artifact("exam_pipelines", ExamPipelines)
    candidate_of, others = _exam_subjects(pipelines.root if pipelines else [], run.config)
    out = MemberEvidence("exam accuracy (multiple choice)", not_mapped=others)
    for key, r in run.payloads(ExamResponse):
        cand = candidate_of.get(r.pipeline)
        if cand is None:
            continue
        if r.correct is None:
            out.unjudged += 1
            continue
        out.items.append(Evidence(cand, key, sources.get(r.question_id, ()), bool(r.correct)))
    out.unjudged += sum(1 for f in _failed(run, ExamResponse.KIND) if candidate_of.get(f.pipeline or ""))
    return out


def _reckon(run: Run) -> MemberEvidence:
    from proctor.protocols.reckon.run import ReckonItem
    from proctor.protocols.reckon.units import KnowledgeUnit

    sources = {u.unit_id: tuple(u.chunk_ids) for _, u in run.payloads(KnowledgeUnit)}
    out = MemberEvidence("reckon unit accuracy (correct / judged units)")
    for key, it in run.payloads(ReckonItem):
        if it.status not in ("correct", "incorrect"):
            out.unjudged += 1
            continue
        out.items.append(Evidence(it.candidate, key, sources.get(it.unit_id, ()), it.status == "correct"))
    return out


def _interview(run: Run) -> MemberEvidence:
    from proctor.protocols.interview.answers import JUDGE, InterviewAnswer
    from proctor.protocols.interview.base import BaseQuestion

    sources = {q.question_id: tuple(q.chunk_ids) for _, q in run.payloads(BaseQuestion)}
    verdicts = _verdicts(run, JUDGE)
    out = MemberEvidence("interview accuracy (base questions)")
    names = _candidates(run.config)
    for key, a in run.payloads(InterviewAnswer):
        if a.stage != "base" or a.candidate not in names:
            continue
        correct = a.correct if a.correct is not None else verdicts.get(key)
        if correct is None:
            out.unjudged += 1
            continue
        out.items.append(Evidence(a.candidate, key, sources.get(a.question_id, ()), correct))
    return out


def _candidates(cfg: RunConfig) -> set[str]:
    return {c.name for c in cfg.candidates}


READERS: dict[str, Reader] = {"qa": _qa, "exam": _exam, "reckon": _reckon, "interview": _interview}


def member_evidence(run: Run) -> MemberEvidence:
    """The evidence a member's run gives the map (its protocol's reader), read through `load_run`."""
    reader = READERS.get(run.protocol)
    if reader is None:
        return MemberEvidence(f"{run.protocol}: no per-item evidence for the map", supported=False)
    return reader(run)
