"""The judge protocol: an answers file -> one stored row per record -> the judge stack on every row ->
verdicts copied onto the rows (exports and `verdicts.csv` carry them) -> the judge card on labelled rows."""

from __future__ import annotations

import csv
from collections import Counter
from typing import ClassVar, Literal

from proctor.estimates import Estimate
from proctor.judging import exact_match, f1
from proctor.kit.context import RunContext
from proctor.kit.shared.answers import AnswerItem
from proctor.kit.shared.judges import Panel, judge_answers
from proctor.kit.steps import Outcome
from proctor.protocols.judge.card import JudgeCard, busy_seconds, judge_card
from proctor.protocols.judge.config import Config
from proctor.protocols.judge.grade import DecidedBy, JudgedAnswer, from_judgment
from proctor.protocols.judge.result import JudgeResult
from proctor.protocols.judge.rows import Label, Row, read_rows
from proctor.store.labels import LABELS_FILE, LabelStore

VERDICTS_FILE = "verdicts.csv"
VERDICT_COLUMNS = ("id", "verdict", "p_correct", "method", "decided_by", "reason", "label")


class JudgedRow(AnswerItem):
    """A row of the answers file; its verdict and human label are copied on after judging."""

    KIND: ClassVar[str] = "judged_answer"
    label: Label | None = None
    verdict: Literal["correct", "incorrect"] | None = None
    p_correct: float | None = None
    method: str | None = None
    decided_by: DecidedBy | None = None
    reason: str | None = None


async def run(ctx: RunContext[Config]) -> JudgeResult:
    cfg = ctx.settings
    rows = read_rows(cfg)
    labels = {r.id: r.label for r in rows}

    async def store_row(r: Row) -> JudgedRow:
        return JudgedRow(
            candidate="answers",
            question_id=r.id,
            question=r.question,
            reference_answer=r.reference,
            answer=r.answer,
            em=exact_match(r.answer, r.reference),
            f1=f1(r.answer, r.reference),
        )

    stored = await ctx.map(
        "reading answers",
        rows,
        store_row,
        # The row's content identifies it (an edited answer is judged anew); its label does not.
        unit_id=lambda r: (r.id, r.question, r.reference, r.answer),
        role=None,
        output=JudgedRow,
    )
    panel = Panel.from_config(ctx, ctx.role("judge"), cfg.judge_panel, field="judge.judge_panel")
    answered = [(o.key, o.value) for o in stored if o.value is not None]
    outcomes = await judge_answers(
        ctx,
        answered,
        kind="with_reference",
        model=panel,
        rules=cfg.rules,
        guards=cfg.guards,
        description="judging",
    )
    verdicts = {o.key: from_judgment(o.value) for o in outcomes if o.value is not None}

    def with_verdict(o: Outcome[Row, JudgedRow]) -> JudgedRow:
        assert o.value is not None
        v = verdicts.get(o.key)
        update = {"label": labels.get(o.value.question_id)}
        if v is not None:
            update |= v.model_dump()
        return o.value.model_copy(update=update)

    labels |= _viewer_labels(ctx, stored, labels)
    await ctx.revise(stored, with_verdict)
    _write_verdicts(ctx, stored, verdicts, labels)
    return _summary(ctx, stored, verdicts, labels)


def _viewer_labels(
    ctx: RunContext[Config], stored: list[Outcome[Row, JudgedRow]], labels: dict[str, Label | None]
) -> dict[str, Label]:
    """Labels given in `proctor view` on this run's rows (the latest correct / incorrect one per row), for
    the rows the files leave unlabelled: label in the viewer, then `proctor judge FILE --resume` shows the
    card."""
    keys = {o.key: o.unit.id for o in stored if labels.get(o.unit.id) is None}
    if not keys or not (ctx.run_dir / LABELS_FILE).exists():
        return {}
    found: dict[str, Label] = {}
    with LabelStore(ctx.run_dir) as store:
        for lab in store.current(keys):  # in label order: a later label wins
            if lab.label in ("correct", "incorrect"):
                found[keys[lab.item_key]] = "correct" if lab.label == "correct" else "incorrect"
    return found


def _write_verdicts(
    ctx: RunContext[Config],
    stored: list[Outcome[Row, JudgedRow]],
    verdicts: dict[str, JudgedAnswer],
    labels: dict[str, Label | None],
) -> None:
    """The table a user reads beside the report: one line per row, in file order."""
    with open(ctx.run_dir / VERDICTS_FILE, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(VERDICT_COLUMNS)
        for o in stored:
            v = verdicts.get(o.key)
            p = None if v is None else v.p_correct
            w.writerow(
                [
                    o.unit.id,
                    "error" if v is None else v.verdict,
                    "" if p is None else p,
                    "" if v is None else v.method,
                    "" if v is None else v.decided_by,
                    "" if v is None else v.reason,
                    labels.get(o.unit.id) or "",
                ]
            )


def _summary(
    ctx: RunContext[Config],
    stored: list[Outcome[Row, JudgedRow]],
    verdicts: dict[str, JudgedAnswer],
    labels: dict[str, Label | None],
) -> JudgeResult:
    cfg = ctx.settings
    judged = [verdicts[o.key] for o in stored if o.key in verdicts]
    # Seconds per LLM judgment: the wall-clock time the judge model was busy answering (concurrent calls
    # counted once), over the LLM judgments it answered uncached.
    calls = ctx.store.call_intervals(role="judge")
    timed = [k for k, v in verdicts.items() if v.model_call and k in calls]
    busy = busy_seconds([iv for k in timed for iv in calls[k]])
    pairs: list[tuple[Label, JudgedAnswer]] = [
        (label, verdicts[o.key]) for o in stored if (label := labels.get(o.unit.id)) and o.key in verdicts
    ]
    card = judge_card(
        pairs,
        seconds_per_llm_judgment=round(busy / len(timed), 3) if timed else None,
        llm_judgments_timed=len(timed),
        kappa_warning=cfg.kappa_warning,
        seed=ctx.config.seed,
    )
    methods = Counter(v.method for v in judged)
    warnings = []
    errors = len(stored) - len(judged)
    if errors:
        warnings.append(f"{errors} row(s) could not be judged; see the report's failures")
    if card is not None and card.below_threshold:
        kappa = "undefined" if card.kappa.value is None else f"{card.kappa.value:.2f}"
        warnings.append(
            f"Cohen's kappa against the labels is {kappa}, below {cfg.kappa_warning}: do not trust these "
            "verdicts without reading the disagreements (the report lists them)"
        )
    return JudgeResult(
        rows=len(stored),
        judged=len(judged),
        judge_errors=errors,
        labelled=sum(1 for o in stored if labels.get(o.unit.id) is not None),
        accuracy=Estimate.proportion(sum(v.correct for v in judged), len(judged)),
        decided_without_call=Estimate.proportion(sum(not v.model_call for v in judged), len(judged)),
        methods=dict(methods.most_common()),
        card=card,
        table=_table(card, len(judged), sum(v.correct for v in judged)),
        warnings=warnings,
    )


def _table(card: JudgeCard | None, judged: int, correct: int) -> list[dict[str, str]]:
    """The console table: the share judged correct, and the card's lines when there are labels."""
    rows = [{"measure": "judged correct", "value": f"{correct} of {judged}"}]
    if card is None:
        return rows
    rows += [
        {"measure": "labelled rows", "value": f"{card.n} ({card.human_correct} labelled correct)"},
        {"measure": "accuracy vs labels", "value": card.accuracy.text()},
        {"measure": "Cohen's kappa", "value": card.kappa.text()},
        {"measure": 'false "correct"', "value": f"{card.false_correct.k} ({card.false_correct.text()})"},
        {
            "measure": 'false "incorrect"',
            "value": f"{card.false_incorrect.k} ({card.false_incorrect.text()})",
        },
        {"measure": "decided without a model call", "value": card.decided_without_call.text()},
        {
            "measure": "seconds per LLM judgment",
            "value": "—" if card.seconds_per_llm_judgment is None else f"{card.seconds_per_llm_judgment:.2f}",
        },
    ]
    rows += [
        {"measure": f"{m.kind} {m.method}: right / fired", "value": f"{m.right} / {m.fired}"}
        for m in card.methods
    ]
    return rows
