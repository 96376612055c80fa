"""The knowledge map: per candidate x topic, each member's mastery (share of its items on the topic
answered correctly, Wilson interval) and the pooled mastery over all members; and the places where two
members disagree beyond their intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from proctor.estimates import Estimate
from proctor.protocols.suite.evidence import MemberEvidence
from proctor.protocols.suite.topics import TopicModel


class Cell(BaseModel):
    """One candidate on one topic: per member (only members with items on it) and pooled."""

    candidate: str
    topic_id: str
    combined: Estimate
    members: dict[str, Estimate]


class Disagreement(BaseModel):
    """Two members whose 95 % intervals on the same candidate and topic do not overlap."""

    candidate: str
    topic_id: str
    lower: str
    higher: str
    lower_estimate: Estimate
    higher_estimate: Estimate


class Linkage(BaseModel):
    """How a member's items reached the map."""

    judged: int
    linked: int  # judged items whose chunks belong to a topic
    unlinked: int  # judged items without a chunk of the topic model (no or unknown chunk ids)
    unjudged: int


class KnowledgeMap(BaseModel):
    cells: list[Cell]
    disagreements: list[Disagreement]
    linkage: dict[str, Linkage]


def build_map(
    topics: TopicModel, candidates: Sequence[str], evidence: Mapping[str, MemberEvidence]
) -> KnowledgeMap:
    """An item counts on every topic one of its chunks belongs to (once per topic)."""
    topic_of = topics.of_chunks()
    # (candidate, topic, member) -> [correct, judged]
    tallies: dict[tuple[str, str, str], list[int]] = {}
    linkage: dict[str, Linkage] = {}
    for member, ev in evidence.items():
        linked = unlinked = 0
        for e in ev.items:
            hit = sorted({topic_of[c] for c in e.chunk_ids if c in topic_of})
            if not hit:
                unlinked += 1
                continue
            linked += 1
            for t in hit:
                tally = tallies.setdefault((e.candidate, t, member), [0, 0])
                tally[0] += int(e.correct)
                tally[1] += 1
        linkage[member] = Linkage(
            judged=len(ev.items), linked=linked, unlinked=unlinked, unjudged=ev.unjudged
        )
    cells: list[Cell] = []
    disagreements: list[Disagreement] = []
    for cand in candidates:
        for topic in topics.topics:
            per = {
                m: Estimate.proportion(*tallies[(cand, topic.topic_id, m)])
                for m in evidence
                if (cand, topic.topic_id, m) in tallies
            }
            k = sum(e.k or 0 for e in per.values())
            n = sum(e.n for e in per.values())
            cells.append(
                Cell(candidate=cand, topic_id=topic.topic_id, combined=Estimate.proportion(k, n), members=per)
            )
            disagreements += _disagreements(cand, topic.topic_id, per)
    return KnowledgeMap(cells=cells, disagreements=disagreements, linkage=linkage)


def _disagreements(cand: str, topic_id: str, per: Mapping[str, Estimate]) -> list[Disagreement]:
    out = []
    names = list(per)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            ea, eb = per[a], per[b]
            if None in (ea.lo, ea.hi, eb.lo, eb.hi):
                continue
            assert ea.lo is not None and ea.hi is not None and eb.lo is not None and eb.hi is not None
            if ea.hi < eb.lo or eb.hi < ea.lo:
                lower, higher = (a, b) if ea.hi < eb.lo else (b, a)
                out.append(
                    Disagreement(
                        candidate=cand,
                        topic_id=topic_id,
                        lower=lower,
                        higher=higher,
                        lower_estimate=per[lower],
                        higher_estimate=per[higher],
                    )
                )
    return out
