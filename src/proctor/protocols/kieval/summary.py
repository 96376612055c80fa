"""KIEval's results: static accuracy, KIEval scores (reference and paper weighting), per-aspect scores,
rounds and stop reasons per candidate, and the contamination analysis across candidates."""

from __future__ import annotations

from collections import Counter

from proctor.estimates import Estimate
from proctor.kit.context import RunContext
from proctor.kit.steps import Outcome
from proctor.protocols.kieval.candidates import KCandidate
from proctor.protocols.kieval.config import Config
from proctor.protocols.kieval.conversations import ConversationItem, KConversation
from proctor.protocols.kieval.result import (
    AspectScores,
    Contamination,
    KievalCandidate,
    KievalResult,
    QuestionStats,
    StaticAccuracy,
)
from proctor.protocols.kieval.scoring import ASPECTS, contamination
from proctor.protocols.kieval.seeds import SeedQuestion
from proctor.protocols.kieval.static_mc import MCAnswer


def summarise(
    ctx: RunContext[Config],
    cands: list[KCandidate],
    mc: list[Outcome[tuple[KCandidate, SeedQuestion], MCAnswer]],
    conversations: list[Outcome[KConversation, ConversationItem]],
    question_stats: QuestionStats,
    evaluators: list[str],
) -> KievalResult:
    cfg = ctx.settings
    candidates: dict[str, KievalCandidate] = {}
    for cand in cands:
        name = cand.cfg.name
        mine_mc = [o for o in mc if o.unit[0] is cand]
        answered = [o.value for o in mine_mc if o.value is not None]
        static = StaticAccuracy(
            **Estimate.proportion(sum(a.correct for a in answered), len(answered)).model_dump(),
            no_letter=sum(1 for a in answered if a.choice is None),
            errors=len(mine_mc) - len(answered),
        )
        mine = [o for o in conversations if o.unit.cand is cand]
        finished = [o.value for o in mine if o.value is not None]
        scored = [c for c in finished if c.rounds > 0]

        def scale(values: list[float | None], top: float = 100.0) -> Estimate:
            return Estimate.mean([v for v in values if v is not None], bounds=(0.0, top))

        ends = Counter(o.value.end if o.value is not None else "error" for o in mine)
        candidates[name] = KievalCandidate(
            model=ctx.candidate_label(cand.cfg),
            retriever=cand.cfg.retriever,
            conversations=len(conversations) // max(1, len(cands)),
            finished=len(finished),
            scored=len(scored),
            conversation_errors=len(mine) - len(finished),
            kieval=scale([c.kieval for c in scored]),
            kieval_paper=scale([c.kieval_paper for c in scored]),
            aspects=AspectScores(**{a: scale([c.aspects[a] for c in scored]) for a in ASPECTS}),
            rounds=scale([float(c.rounds) for c in finished], float(cfg.max_rounds)),
            stop_reasons=dict(sorted(ends.items())),
            static_accuracy=static,
        )
    pts = [
        (n, r.static_accuracy.value, r.kieval.value)
        for n, r in candidates.items()
        if r.static_accuracy.value is not None and r.kieval.value is not None
    ]
    contam = Contamination.model_validate(
        contamination([p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts], z=cfg.contamination_z)
    )
    return KievalResult(
        questions=question_stats,
        interactor=ctx.role_model_name("interactor"),
        evaluators=evaluators,
        voting=cfg.voting,
        max_rounds=cfg.max_rounds,
        candidates=candidates,
        contamination=contam,
        table=[_table_row(n, r) for n, r in candidates.items()],
        warnings=_warnings(candidates, contam, bool(conversations)),
    )


def _warnings(
    candidates: dict[str, KievalCandidate], contam: Contamination, any_conversation: bool
) -> list[str]:
    warnings = []
    if not any_conversation:
        warnings.append("no conversation was run: no seed question survived loading and the confident set")
    evaluator_errors = sum(r.stop_reasons.get("evaluator_error", 0) for r in candidates.values())
    if evaluator_errors:
        warnings.append(
            f"{evaluator_errors} conversation(s) ended at a round whose evaluator reply could not be parsed; "
            "those rounds are recorded as errors and not scored"
        )
    failed = sum(r.conversation_errors for r in candidates.values())
    if failed:
        warnings.append(f"{failed} conversation(s) failed on a model error; run again with --resume to retry")
    if contam.flagged:
        warnings.append(
            "possible contamination (KIEval score far below what static accuracy predicts): "
            + ", ".join(contam.flagged)
        )
    return warnings


def _table_row(name: str, r: KievalCandidate) -> dict[str, str]:
    def fmt(m: Estimate, scale: float = 1.0, digits: int = 1) -> str:
        if m.value is None:
            return "—"
        v = f"{scale * m.value:.{digits}f}"
        if m.lo is not None and m.hi is not None:
            v += f" [{scale * m.lo:.{digits}f}, {scale * m.hi:.{digits}f}]"
        return v + f" n={m.n}"

    stops = {k: v for k, v in r.stop_reasons.items() if k != "completed"}
    return {
        "candidate": name,
        "KIEval (ref)": fmt(r.kieval),
        "KIEval (paper)": fmt(r.kieval_paper),
        "static acc %": fmt(r.static_accuracy, 100.0),
        "rounds": fmt(r.rounds, digits=2),
        "early ends": ", ".join(f"{k} {v}" for k, v in stops.items()) or "—",
    }
