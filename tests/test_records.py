"""The one records reader: every format, BOM, comments, headerless CSV, and the two bad-record policies."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from proctor.errors import UserError
from proctor.records import BadRecord, read_records


def _data(path: Path, **kw: object) -> list[object]:
    return [r.data for r in read_records(path, field="x.path", **kw)]  # type: ignore[arg-type]


def test_jsonl_with_bom_blank_and_comment_lines(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_text('\ufeff{"a": 1}\n\n# note\n{"a": 2}\n', encoding="utf-8")
    assert _data(f, comments=True) == [{"a": 1}, {"a": 2}]
    recs = list(read_records(f, field="x.path", comments=True))
    assert [r.where for r in recs] == ["line 1", "line 4"]
    with pytest.raises(UserError, match=r"x\.path: .*a\.jsonl, line 3: not valid JSON"):
        _data(f)  # without comments, '# note' is a malformed record


def test_bad_record_raises_or_goes_to_on_bad(tmp_path: Path) -> None:
    f = tmp_path / "b.ndjson"
    f.write_text('{"a": 1}\nnot json\n{"a": 3}\n')
    seen: list[BadRecord] = []
    assert _data(f, on_bad=seen.append) == [{"a": 1}, {"a": 3}]
    assert seen[0].number == 2 and "not valid JSON" in seen[0].problem
    with pytest.raises(UserError, match="line 2"):
        _data(f)


def test_json_list_wrapped_list_and_single_object(tmp_path: Path) -> None:
    (tmp_path / "l.json").write_text(json.dumps([{"a": 1}, {"a": 2}]))
    (tmp_path / "w.json").write_text(json.dumps({"questions": [{"a": 1}]}))
    (tmp_path / "o.json").write_text(json.dumps({"a": 5}))
    assert _data(tmp_path / "l.json") == [{"a": 1}, {"a": 2}]
    assert _data(tmp_path / "w.json") == [{"a": 1}]
    assert _data(tmp_path / "o.json") == [{"a": 5}]


def test_csv_with_and_without_header(tmp_path: Path) -> None:
    f = tmp_path / "c.csv"
    f.write_text("question,answer\nWhy?,B\n\n")
    assert _data(f) == [{"question": "Why?", "answer": "B"}]
    g = tmp_path / "g.tsv"
    g.write_text("Why?\tx\ty\tA\n")
    assert _data(g, csv_header="auto", is_header=lambda names: "question" in names) == [
        ["Why?", "x", "y", "A"]
    ]
    assert _data(tmp_path / "c.csv", csv_header="no")[0] == ["question", "answer"]
    (tmp_path / "e.csv").write_text("")
    assert _data(tmp_path / "e.csv") == []


def test_parquet_and_unknown_extension(tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": [1, 2, 3]}), tmp_path / "p.parquet")
    assert _data(tmp_path / "p.parquet") == [{"a": 1}, {"a": 2}, {"a": 3}]
    (tmp_path / "q.xlsx").write_text("x")
    with pytest.raises(UserError, match=r"set x\.format"):
        list(read_records(tmp_path / "q.xlsx", field="x.path", format_field="x.format"))
    with pytest.raises(UserError, match="not found"):
        _data(tmp_path / "missing.jsonl")
