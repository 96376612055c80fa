"""The exam takes every candidate kind: a Python callable answers with the options shown and is graded by
the letter its reply names (a reply naming none is an error on its item, cause `unparseable`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from proctor.runner import run_config
from test_exam_protocol import exam_config  # noqa: F401  (the fixture)


def test_python_candidate_sits_the_exam(exam_config: Path, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "pipe.py").write_text(
        "def answer(question, choices=None):\n"
        "    assert choices, 'the exam shows the options'\n"
        "    if sum(map(ord, question)) % 2:\n"
        "        return 'I cannot tell'\n"
        "    return 'The answer is B.'\n"
    )
    text = exam_config.read_text().replace(
        "  - {name: dead, model: broken}",
        f'  - {{name: dead, model: broken}}\n  - {{name: pipe, python: "{tmp_path / "pipe.py"}:answer"}}',
    )
    exam_config.write_text(text)
    result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    rows = con.execute(
        "SELECT status, error_cause, json_extract(data, '$.selected') FROM items "
        "WHERE kind = 'exam_response' "
        "AND json_extract(data, '$.pipeline') = 'pipe'"
    ).fetchall()
    assert rows
    done = [r for r in rows if r[0] == "done"]
    errors = [r for r in rows if r[0] == "error"]
    assert done and all(r[2] == "B" for r in done)
    assert errors and all(r[1] == "unparseable" for r in errors)
    assert "pipe" in str(result.summary)
