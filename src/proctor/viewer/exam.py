"""An exam question in the item page: its options with how many pipelines chose each, its closed-book
guessability, its IRT parameters and its item characteristic curve (an SVG drawn from the stored numbers).

The per-question view is the static report's (`proctor.protocols.exam.report.question_view`, over
`response_view` rows); only this question's responses are read, plus the `exam_irt` and `exam_stats`
artifacts the exam protocol stored (read as its typed `ExamIrt` and `ExamStats`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.grading import ExamResponse
from proctor.protocols.exam.report import (
    OptionStat,
    item_guessability,
    pruned_items,
    question_view,
    response_view,
)
from proctor.protocols.exam.result import ExamIrt, ExamStats
from proctor.psychometrics import item_characteristic
from proctor.store.record import RunRecord

QUESTION_KIND = "exam_question"
THETA_MIN, THETA_MAX = -4.0, 4.0
THETA = np.linspace(THETA_MIN, THETA_MAX, 81)
# The curve's box in SVG user units: width, height and the margins left for the axes' labels.
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 360, 200, 40, 12, 10, 34


@dataclass(frozen=True)
class IrtParams:
    model: str  # 1pl / 2pl / 3pl
    difficulty: float | None
    discrimination: float | None
    guessing: float | None
    p_correct: float | None  # the share of pipelines right on it, in the fitted data


@dataclass(frozen=True)
class Tick:
    at: float  # SVG coordinate along the axis
    label: str


@dataclass(frozen=True)
class IccPlot:
    """P(correct | theta) for theta in [-4, 4] as an SVG polyline, with the difficulty and guessing marked."""

    points: str
    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    difficulty_x: float | None  # inside the plotted range only
    guessing_y: float | None


@dataclass(frozen=True)
class ExamItem:
    qid: str
    options: list[OptionStat]
    n_graded: int
    n_good: int
    n_failed: int
    guessability: float | None
    irt: IrtParams | None
    icc: IccPlot | None
    pruned_at_step: int | None


def _x(theta: float) -> float:
    return LEFT + (theta - THETA_MIN) / (THETA_MAX - THETA_MIN) * (WIDTH - LEFT - RIGHT)


def _y(p: float) -> float:
    return TOP + (1.0 - p) * (HEIGHT - TOP - BOTTOM)


def icc_plot(difficulty: float, discrimination: float | None, guessing: float | None) -> IccPlot:
    """The item characteristic curve from stored parameters (a = 1 where the model has none, c = 0)."""
    c = guessing or 0.0
    p = item_characteristic(THETA, difficulty, discrimination if discrimination is not None else 1.0, c)
    points = " ".join(f"{_x(float(t)):.1f},{_y(float(v)):.1f}" for t, v in zip(THETA, p, strict=True))
    return IccPlot(
        points=points,
        width=WIDTH,
        height=HEIGHT,
        left=LEFT,
        right=WIDTH - RIGHT,
        top=TOP,
        bottom=HEIGHT - BOTTOM,
        x_ticks=[Tick(_x(t), f"{t:g}") for t in range(-4, 5, 2)],
        y_ticks=[Tick(_y(v), f"{v:g}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)],
        difficulty_x=_x(difficulty) if THETA_MIN <= difficulty <= THETA_MAX else None,
        guessing_y=_y(c) if c > 0 else None,
    )


M = TypeVar("M", bound=BaseModel)


def _artifact(run: RunRecord, name: str, model: type[M]) -> M | None:
    """A stored artifact as its typed model (None when absent or of another shape)."""
    try:
        return run.artifact(name, model)
    except ValidationError:
        return None


def exam_item(run: RunRecord, key: str, data: Any) -> ExamItem | None:
    """The exam view of an `exam_question` item (None for any other data)."""
    try:
        question = ExamQuestion.model_validate(data)
    except ValidationError:
        return None
    qid = question.id
    answers = [
        response_view(r)
        for r in run.items_where(ExamResponse.KIND, "question_id", qid, exclude_status="superseded")
    ]
    fit = _artifact(run, "exam_irt", ExamIrt)
    irt_item = next((it for it in fit.items if it.id == qid), None) if fit is not None else None
    q = question_view(question, answers, irt_item, pruned_items(fit).get(qid))
    guess = question.guessability
    if guess is None:
        guess = item_guessability(_artifact(run, "exam_stats", ExamStats)).get(qid)
    irt = icc = None
    if irt_item is not None and fit is not None and fit.model is not None:
        irt = IrtParams(
            model=fit.model,
            difficulty=irt_item.difficulty,
            discrimination=irt_item.discrimination,
            guessing=irt_item.guessing,
            p_correct=irt_item.p_correct,
        )
        if irt.difficulty is not None:
            icc = icc_plot(irt.difficulty, irt.discrimination, irt.guessing)
    return ExamItem(
        qid=qid,
        options=q.options,
        n_graded=q.n_graded,
        n_good=q.n_good,
        n_failed=q.n_failed,
        guessability=guess,
        irt=irt,
        icc=icc,
        pruned_at_step=q.dropped,
    )
