"""The base question set: read from a question file or a finished exam / qa run, sampled, labelled with a
difficulty (from the file, the exam's IRT difficulty, or the examiner), and split into batches."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, Field

from proctor.errors import StepError, UserError
from proctor.kit.context import RunContext
from proctor.kit.record import load_run
from proctor.kit.shared.question_file import DIFFICULTIES, Difficulty, load_questions
from proctor.kit.shared.questions import Question
from proctor.kit.steps import Payload
from proctor.prompts import render_messages
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.result import ExamIrt
from proctor.protocols.interview.config import Config

LABEL_PROMPT = "interview/label_difficulty"


class BaseQuestion(Payload):
    """A base question of the interview, as asked: options (multiple choice) or none (short answer)."""

    KIND: ClassVar[str] = "interview_base_question"
    question_id: str
    question: str
    choices: list[str]
    answer_index: int | None
    answer: str
    difficulty: Difficulty | None
    difficulty_source: str  # file | irt | examiner | default (the examiner's label failed: medium)
    context: str | None = None
    chunk_ids: list[str] = Field(default_factory=list)
    batch: int = 0

    @property
    def reference(self) -> str:
        """The reference answer as judged: the correct option's text, or the phrase."""
        return self.answer


class DifficultyLabel(Payload):
    KIND: ClassVar[str] = "interview_difficulty_label"
    question_id: str
    difficulty: Difficulty


class SourceStats(BaseModel):
    """How the base questions were read: the file (or run store), records read and usable, why records
    were skipped (question files), how many an exam's IRT fit labelled."""

    file: str
    read: int
    usable: int
    skipped: dict[str, int] | None = None
    irt_labelled: int | None = None


def load_base(cfg: Config) -> tuple[list[BaseQuestion], SourceStats]:
    """Every usable base question in file order, and the reading statistics."""
    if cfg.questions is not None:
        loaded, stats = load_questions(cfg.questions, section="interview.questions")
        return [
            BaseQuestion(
                question_id=q.question_id,
                question=q.question,
                choices=list(q.choices),
                answer_index=q.answer_index,
                answer=q.answer,
                difficulty=q.difficulty,
                difficulty_source="file" if q.difficulty else "examiner",
                context=q.context,
            )
            for q in loaded
        ], SourceStats.model_validate(stats)
    assert cfg.from_run is not None
    return _from_run(Path(cfg.from_run))


def _from_run(folder: Path) -> tuple[list[BaseQuestion], SourceStats]:
    """The base questions of a finished exam run (its exam, IRT difficulty tiers when it was calibrated) or
    qa run (its questions with their reference answers), read through `load_run`."""
    db = folder / "run.sqlite"
    if not folder.is_dir() or not db.is_file():
        raise UserError(
            f"interview.from_run: {folder} is not a proctor run folder (no run.sqlite). Give the folder "
            f"of a finished exam or qa run (runs/<name>-<hash>-<time>/), or use `questions: {{path: ...}}`."
        )
    with load_run(folder) as run:
        exam = [q for _, q in run.payloads(ExamQuestion)]
        irt = run.artifact("exam_irt", ExamIrt) if exam else None
        qa = [] if exam else [q for _, q in run.payloads(Question)]
    if exam:
        b = {it.id: it.difficulty for it in (irt.items if irt else []) if it.difficulty is not None}
        tiers = _terciles(b)
        out = [
            BaseQuestion(
                question_id=q.id,
                question=q.question,
                choices=list(q.choices),
                answer_index=q.answer_index,
                answer=q.correct_option,
                difficulty=tiers.get(q.id),
                difficulty_source="irt" if q.id in tiers else "examiner",
                chunk_ids=list(q.source_chunk_ids),
            )
            for q in exam
        ]
        exam_file = folder / "exam.jsonl"
        return out, SourceStats(file=str(exam_file), read=len(out), usable=len(out), irt_labelled=len(tiers))
    if not qa:
        raise UserError(
            f"interview.from_run: {folder} holds neither exam questions nor qa questions. Give the folder of "
            f"a finished exam or qa run."
        )
    out = [
        BaseQuestion(
            question_id=q.question_id,
            question=q.question,
            choices=[],
            answer_index=None,
            answer=q.reference_answer,
            difficulty=None,
            difficulty_source="examiner",
            chunk_ids=q.source_chunk_ids,
        )
        for q in qa
    ]
    return out, SourceStats(file=str(db), read=len(out), usable=len(out))


def _terciles(b: dict[str, float]) -> dict[str, Difficulty]:
    """IRT difficulty b -> easy / medium / hard by thirds of the calibrated items (lowest b = easy)."""
    if len(b) < 3:
        return {}
    lo, hi = np.quantile(list(b.values()), [1 / 3, 2 / 3])
    return {k: "easy" if v <= lo else "medium" if v <= hi else "hard" for k, v in b.items()}


def sample(ctx: RunContext[Config], questions: list[BaseQuestion]) -> list[BaseQuestion]:
    n = ctx.settings.num_questions
    if n is None or n >= len(questions):
        return questions
    picked = sorted(int(i) for i in ctx.rng.choice(len(questions), size=n, replace=False))
    return [questions[i] for i in picked]


async def label_difficulty(ctx: RunContext[Config], questions: list[BaseQuestion]) -> list[BaseQuestion]:
    """The examiner labels the questions the source left without a difficulty (JSON: easy/medium/hard).
    A failed label is recorded on its item and the question is graded as medium (`default`)."""
    todo = [q for q in questions if q.difficulty is None]
    examiner = ctx.role("examiner")
    schema = {
        "type": "object",
        "properties": {"difficulty": {"type": "string", "enum": list(DIFFICULTIES)}},
        "required": ["difficulty"],
    }

    async def label(q: BaseQuestion) -> DifficultyLabel:
        reply = await examiner.generate(
            render_messages(LABEL_PROMPT, question=q.question, choices=q.choices, answer=q.answer),
            json_schema=schema,
            temperature=0.0,
            max_tokens=24,
        )
        value = str(reply.parsed.get("difficulty", "")).strip().lower()
        if value not in DIFFICULTIES:
            raise StepError(f"difficulty {value!r} is not easy / medium / hard", cause="invalid_output")
        return DifficultyLabel(question_id=q.question_id, difficulty=DIFFICULTIES[DIFFICULTIES.index(value)])

    outcomes = await ctx.map(
        "interview: labelling difficulty",
        todo,
        label,
        unit_id=lambda q: (q.question, q.choices, q.answer),
        role="examiner",
        output=DifficultyLabel,
        context=lambda q: {"question_id": q.question_id, "question": q.question},
    )
    labels = {o.unit.question_id: o.value.difficulty for o in outcomes if o.value is not None}
    out = []
    for q in questions:
        if q.difficulty is None:
            found = labels.get(q.question_id)
            q = q.model_copy(
                update={
                    "difficulty": found or "medium",
                    "difficulty_source": "examiner" if found else "default",
                }
            )
        out.append(q)
    return out


async def store_questions(ctx: RunContext[Config], questions: list[BaseQuestion]) -> None:
    """Record the base questions as asked (batch, difficulty and its source) as items: other runs read
    them back (a suite's knowledge map takes their chunk ids)."""

    async def keep(q: BaseQuestion) -> BaseQuestion:
        return q

    await ctx.map(
        "interview: base question set", questions, keep, unit_id=lambda q: q, role=None, output=BaseQuestion
    )


def batches(questions: list[BaseQuestion], size: int) -> list[list[BaseQuestion]]:
    """Consecutive batches of `size` in the given order; each question carries its batch number."""
    out: list[list[BaseQuestion]] = []
    for i in range(0, len(questions), size):
        out.append([q.model_copy(update={"batch": i // size}) for q in questions[i : i + size]])
    return out
