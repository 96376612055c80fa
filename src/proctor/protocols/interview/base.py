"""The base question set: read from a question file or a finished exam / qa run, sampled, labelled with a
difficulty (from the file, the exam's IRT difficulty, or the examiner), and split into batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from proctor.errors import StepError, UserError
from proctor.prompts import prompt_version, render_messages
from proctor.kit.context import RunContext, work_key
from proctor.protocols.exam.exam_file import read_exam
from proctor.protocols.interview.config import Config
from proctor.kit.shared.question_file import DIFFICULTIES, Difficulty, load_questions
from proctor.kit.shared.questions import Question
from proctor.kit.steps import Payload, read_items
from proctor.store import RunStore

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


def load_base(cfg: Config) -> tuple[list[BaseQuestion], dict[str, Any]]:
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
        ], stats
    assert cfg.from_run is not None
    return _from_run(Path(cfg.from_run))


def _from_run(folder: Path) -> tuple[list[BaseQuestion], dict[str, Any]]:
    db = folder / "run.sqlite"
    if not folder.is_dir() or not db.is_file():
        raise UserError(
            f"interview.from_run: {folder} is not a proctor run folder (no run.sqlite). Give the folder "
            f"of a finished exam or qa run (runs/<name>-<hash>-<time>/), or use `questions: {{path: ...}}`."
        )
    exam_file = folder / "exam.jsonl"
    store = RunStore(db)
    try:
        if exam_file.is_file():
            irt = store.get_artifact("exam_irt") or {}
            b = {
                it["id"]: it["difficulty"] for it in irt.get("items", []) if it.get("difficulty") is not None
            }
            tiers = _terciles(b)
            out = [
                BaseQuestion(
                    question_id=str(q["id"]),
                    question=q["question"],
                    choices=list(q["choices"]),
                    answer_index=int(q["answer_index"]),
                    answer=q["choices"][int(q["answer_index"])],
                    difficulty=tiers.get(str(q["id"])),
                    difficulty_source="irt" if str(q["id"]) in tiers else "examiner",
                    chunk_ids=list(q.get("source_chunk_ids") or []),
                )
                for q in read_exam(exam_file)
            ]
            return out, {
                "file": str(exam_file),
                "read": len(out),
                "usable": len(out),
                "irt_labelled": len(tiers),
            }
        qa = [q for _, q in read_items(store, Question)]
    finally:
        store.close()
    if not qa:
        raise UserError(
            f"interview.from_run: {folder} holds neither an exam.jsonl nor qa questions. Give the folder of "
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
    return out, {"file": str(db), "read": len(out), "usable": len(out)}


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
    version = prompt_version(LABEL_PROMPT)
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
        key=lambda q: work_key("idl", q.question, q.choices, q.answer, examiner.provider.identity(), version),
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


def batches(questions: list[BaseQuestion], size: int) -> list[list[BaseQuestion]]:
    """Consecutive batches of `size` in the given order; each question carries its batch number."""
    out: list[list[BaseQuestion]] = []
    for i in range(0, len(questions), size):
        out.append([q.model_copy(update={"batch": i // size}) for q in questions[i : i + size]])
    return out
