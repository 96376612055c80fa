"""The interview's results: per variant and candidate the JudgeAgent score, base accuracy, extension
accuracy by difficulty, the tier trajectory per batch, the validation rates, and what went unscored; the
ablation table across variants; the artifact the report reads."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from proctor.estimates import Estimate
from proctor.graph import ContextGraph, GraphBuild
from proctor.kit.context import RunContext
from proctor.kit.shared.question_file import DIFFICULTIES
from proctor.protocols.interview.base import BaseQuestion
from proctor.protocols.interview.config import VARIANTS, Config
from proctor.protocols.interview.difficulty import CORRECT, WRONG, score
from proctor.protocols.interview.extension import Interview
from proctor.protocols.interview.feedback import Feedback
from proctor.protocols.interview.paths import KnowledgeText
from proctor.protocols.interview.result import (
    BaseStats,
    CandidateResult,
    CandidateRounds,
    Example,
    ExampleQuestion,
    ExampleStep,
    GraphSummary,
    InterviewArtifact,
    InterviewResult,
    Scores,
    Unscored,
    VariantResult,
)
from proctor.protocols.interview.validation import validation_rates

SNIPPET = 320  # characters of each path chunk shown in the report


@dataclass
class VariantRun:
    """What one variant produced: the interviews, the feedback written, the validation grades."""

    variant: str
    interviews: dict[tuple[str, int], Interview]
    feedback: dict[tuple[str, int], Feedback]
    after: dict[tuple[str, str], bool | None]  # (candidate, base question id) -> correct after feedback
    stats: Counter[str]
    knowledge: dict[str, KnowledgeText]


def _candidate(res: VariantRun, name: str) -> CandidateResult:
    mine = [iv for (c, _), iv in sorted(res.interviews.items()) if c == name]
    tested = [t for iv in mine for t in iv.tested]
    graded = [t for t in tested if t.correct is not None]
    base = [t for t in tested if t.stage == "base"]
    ext = [t for t in tested if t.stage == "extension"]
    pairs = [
        (bool(t.correct), bool(res.after[(name, t.question_id)]))
        for t in base
        if t.correct is not None and res.after.get((name, t.question_id)) is not None
    ]
    by_tier = {
        d: Estimate.proportion(sum(1 for t in ext if t.difficulty == d and t.correct), n)
        for d in DIFFICULTIES
        if (n := sum(1 for t in ext if t.difficulty == d and t.correct is not None))
    }
    return CandidateResult(
        score=Estimate.mean(
            [score(t.difficulty, bool(t.correct)) for t in graded], bounds=(WRONG["hard"], CORRECT["hard"])
        ),
        base_accuracy=Estimate.proportion(
            sum(1 for t in base if t.correct), sum(1 for t in base if t.correct is not None)
        ),
        extension_accuracy=Estimate.proportion(
            sum(1 for t in ext if t.correct), sum(1 for t in ext if t.correct is not None)
        ),
        extension_by_difficulty=by_tier,
        extension_questions=len(ext),
        unscored=Unscored(
            base=sum(1 for t in base if t.correct is None),
            extension=sum(1 for t in ext if t.correct is None),
            validation=sum(
                1
                for t in base
                if (name, t.question_id) in res.after and res.after[(name, t.question_id)] is None
            ),
        ),
        validation=validation_rates(pairs),
        trajectories={str(iv.batch): list(iv.tiers) for iv in mine},
        batches_without_feedback=sum(1 for iv in mine if (name, iv.batch) not in res.feedback),
    )


def summarise(
    ctx: RunContext[Config],
    questions: list[BaseQuestion],
    base_stats: BaseStats,
    results: dict[str, VariantRun],
    graph: ContextGraph | None,
    graph_info: GraphBuild | None,
) -> InterviewResult:
    names = [c.name for c in ctx.config.candidates]
    variants: dict[str, VariantResult] = {}
    scores: dict[str, Scores] = {}
    table: list[dict[str, str]] = []
    for variant, res in results.items():
        per = {n: _candidate(res, n) for n in names}
        variants[variant] = VariantResult(
            description=VARIANTS[variant], stats=dict(res.stats), candidates=per
        )
        for n, r in per.items():
            v = r.validation
            scores[n if len(results) == 1 else f"{n} [{variant}]"] = Scores(
                acc1=v.acc1, acc2=v.acc2, cr=v.cr, cte=v.cte, score=r.score
            )
            table.append(
                {
                    "candidate": n,
                    "variant": variant,
                    "score": r.score.text(),
                    "ACC1": v.acc1.text(),
                    "ACC2": v.acc2.text(),
                    "CR": v.cr.text(),
                    "CtE": v.cte.text(),
                }
            )
    unscored = sum(
        r.unscored.base + r.unscored.extension + r.unscored.validation
        for v in variants.values()
        for r in v.candidates.values()
    )
    warnings = (
        [f"{unscored} answers could not be graded (failures recorded on their items)"] if unscored else []
    )
    return InterviewResult(
        base_questions=base_stats,
        graph=None
        if graph is None
        else GraphSummary(
            **(graph_info or GraphBuild(key="", reused=False, chunks=0)).model_dump(),
            **graph.stats().model_dump(),
        ),
        variants=variants,
        table=table,
        warnings=warnings,
        scores=scores,
        interview=InterviewArtifact(
            questions=questions,
            examples=_examples(results, ctx.settings.examples, graph),
            feedback=[fb for res in results.values() for _, fb in sorted(res.feedback.items())],
            rounds={
                variant: {
                    f"{c}|{b}": CandidateRounds(tiers=iv.tiers, rounds=iv.rounds)
                    for (c, b), iv in sorted(res.interviews.items())
                }
                for variant, res in results.items()
            },
        ),
    )


def _examples(results: dict[str, VariantRun], n: int, graph: ContextGraph | None) -> list[Example]:
    """Up to n knowledge texts (paths first) with the questions written from them."""
    seen: dict[str, Example] = {}
    asked: dict[str, dict[str, ExampleQuestion]] = {}  # knowledge key -> question text -> question
    for res in results.values():
        for iv in res.interviews.values():
            for info in iv.rounds:
                know = res.knowledge.get(info.knowledge_key)
                if know is None:
                    continue
                if info.knowledge_key not in seen:
                    seen[info.knowledge_key] = Example(
                        batch=know.batch,
                        round=know.round,
                        source=know.source,
                        seed_name=know.seed_name,
                        stopped=know.stopped,
                        steps=[
                            ExampleStep(
                                entity=s.entity,
                                chunk_id=s.chunk_id,
                                candidates=[
                                    graph.entities[e].name
                                    for e in s.drawn_from
                                    if graph is not None and e in graph.entities
                                ],
                            )
                            for s in know.steps
                        ],
                        snippets=[t[:SNIPPET] for t in know.text.split("\n\n")],
                        questions=[],
                    )
                mine = asked.setdefault(info.knowledge_key, {})
                for q in info.generated or []:
                    mine.setdefault(q.question, ExampleQuestion(**q.model_dump(), tier=info.tier))
    ordered = sorted(seen.items(), key=lambda kv: (kv[1].source != "path", kv[1].batch, kv[1].round))
    return [ex.model_copy(update={"questions": list(asked[k].values())}) for k, ex in ordered[:n]]
