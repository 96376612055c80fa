"""`proctor judge` and `proctor.judge`: an answers file graded by the judge stack (rules, a scripted LLM
judge, guards), the judge card checked by hand on six labelled rows, CSV and JSONL inputs with remapped
fields, user errors, resume, and the card's statistics against bench/judge_agreement.py's."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

import proctor
from proctor.cli.main import app
from proctor.errors import UserError
from proctor.kit.record import load_run
from proctor.models import get_model
from proctor.models.scripted import register_script
from proctor.protocols.judge.card import busy_seconds, judge_card
from proctor.protocols.judge.grade import JudgedAnswer, decided_by
from proctor.protocols.judge.result import JudgeResult
from proctor.protocols.judge.run import JudgedRow
from proctor.viewer import create_app

CALLS: list[str] = []


def judge_script(messages: list[Any], params: Any) -> str:
    """Says "correct" to every answer but the one that says Blue; records the answers it was asked about."""
    text = next(m["content"] for m in messages if m["role"] == "user")
    CALLS.append(text)
    return json.dumps({"verdict": "incorrect" if "Blue" in text else "correct"})


def must_not_be_called(messages: list[Any], params: Any) -> str:
    raise AssertionError("a rule was sure; the judge model must not be asked")


register_script("t32-judge", judge_script)
register_script("t32-never", must_not_be_called)

# (id, question, reference, answer, human label); what decides each, by the rules and guards of
# proctor.judging.equivalence and the script above:
ROWS = [
    ("r1", "Who led the families?", "Aud Tennick", "It was Aud Tennick.", "correct"),  # rule, right
    ("r2", "How many barrels?", "900 barrels", "Around 700 barrels.", "incorrect"),  # LLM yes, guard: right
    ("r3", "Who founded Velmora?", "Ostrid Kael", "Ostrid Kaal", "correct"),  # LLM yes, guard: wrong
    ("r4", "What colour are the lanterns?", "green", "They are a pale sea colour.", "incorrect"),  # LLM yes
    ("r5", "What colour are the doors?", "green", "Blue.", "incorrect"),  # LLM no
    ("r6", "Where is the market?", "the harbour", "Down by the quay.", "correct"),  # LLM yes
]


def write_jsonl(
    path: Path, names: tuple[str, ...] = ("id", "question", "reference", "answer", "label")
) -> Path:
    path.write_text(
        "".join(json.dumps(dict(zip(names, r, strict=True))) + "\n" for r in ROWS), encoding="utf-8"
    )
    return path


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, ["judge", *args, "--model", "scripted/t32-judge", "--quiet"])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def only_run(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def test_card_numbers_by_hand_and_no_call_for_the_rule_row(tmp_path: Path) -> None:
    CALLS.clear()
    answers = write_jsonl(tmp_path / "answers.jsonl")
    res = invoke(str(answers), "--out", str(tmp_path / "runs"))
    run_dir = only_run(tmp_path / "runs")
    # The rule row made no call: five calls, none about r1's answer.
    assert len(CALLS) == 5 and not any("Aud Tennick" in c for c in CALLS)
    with sqlite3.connect(run_dir / "run.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM model_calls").fetchone()[0] == 5
    with open(run_dir / "verdicts.csv", encoding="utf-8") as f:
        table = {r["id"]: r for r in csv.DictReader(f)}
    assert [table[f"r{i}"]["verdict"] for i in range(1, 7)] == [
        "correct", "incorrect", "incorrect", "correct", "incorrect", "correct",
    ]  # fmt: skip
    assert (table["r1"]["method"], table["r1"]["decided_by"]) == ("contains_reference", "rule")
    assert (table["r2"]["method"], table["r2"]["decided_by"]) == ("reference_quantity_missing", "guard")
    assert (table["r4"]["method"], table["r4"]["decided_by"]) == ("llm", "llm")
    assert table["r3"]["label"] == "correct" and table["r2"]["reason"].startswith(
        "reference_quantity_missing"
    )

    with load_run(run_dir) as run:
        result = run.result
        assert isinstance(result, JudgeResult)
        card = result.card
        assert card is not None
        # By hand: human C/I = CICIIC, judge = CIICIC -> agree on r1 r2 r5 r6.
        assert card.confusion == {
            "correct": {"correct": 2, "incorrect": 1},
            "incorrect": {"correct": 1, "incorrect": 2},
        }
        assert card.accuracy.value == pytest.approx(4 / 6, abs=1e-6)
        # p_o = 4/6, p_e = (3*3 + 3*3) / 36 = 1/2 -> kappa = (2/3 - 1/2) / (1/2) = 1/3
        assert card.kappa.value == pytest.approx(1 / 3, abs=1e-6)
        assert (
            card.kappa.lo is not None
            and card.kappa.hi is not None
            and card.kappa.lo <= 1 / 3 <= card.kappa.hi
        )
        assert (card.false_correct.k, card.false_correct.n) == (1, 6)
        assert (card.false_incorrect.k, card.false_incorrect.n) == (1, 6)
        assert card.decided_without_call.value == pytest.approx(1 / 6, abs=1e-6)
        precision = {(m.kind, m.method): (m.right, m.fired) for m in card.methods}
        assert precision == {
            ("rule", "contains_reference"): (1, 1),
            ("guard", "reference_quantity_missing"): (1, 1),
            ("guard", "reference_term_missing"): (0, 1),
        }
        assert card.seconds_per_llm_judgment is not None and card.llm_judgments_timed == 5
        assert card.below_threshold and any("kappa" in w and "below 0.6" in w for w in result.warnings)
        html = (run_dir / "report.html").read_text(encoding="utf-8")
        assert "Judge card" in html and "reference_term_missing" in html and "Disagreements" in html
    assert "Cohen's kappa" in res.output and "0.33" in res.output


def test_csv_with_remapped_fields_and_a_labels_file(tmp_path: Path) -> None:
    path = tmp_path / "answers.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["key", "q", "gold", "response"])
        w.writerows([r[:4] for r in ROWS])
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps({"key": r[0], "human": r[4]}) + "\n" for r in ROWS), encoding="utf-8"
    )
    fields = ["--field", "id=key", "--field", "question=q", "--field", "reference=gold", "--field"]
    invoke(str(path), *fields, "answer=response", "--field", "label=human", "--labels", str(labels),
           "--out", str(tmp_path / "runs"), "--kappa-warning", "0.3")  # fmt: skip
    with load_run(only_run(tmp_path / "runs")) as run:
        result = run.result
        assert isinstance(result, JudgeResult) and result.card is not None
        assert result.rows == 6 and result.labelled == 6
        assert result.card.kappa.value == pytest.approx(1 / 3, abs=1e-6)
        assert not result.card.below_threshold and not result.warnings  # 1/3 is above the 0.3 asked for
        assert result.methods["contains_reference"] == 1 and result.methods["llm"] == 3


def test_unlabelled_file_has_no_card_until_rows_are_labelled_in_the_viewer(tmp_path: Path) -> None:
    answers = write_jsonl(tmp_path / "a.jsonl", ("id", "question", "reference", "answer", "note"))
    invoke(str(answers), "--out", str(tmp_path / "runs"))
    run_dir = only_run(tmp_path / "runs")
    with load_run(run_dir) as run:
        assert isinstance(run.result, JudgeResult)
        assert run.result.card is None and run.result.labelled == 0 and run.result.judged == 6
        keys = {row.question_id: key for key, row in run.payloads(JudgedRow)}
    viewer = TestClient(create_app(tmp_path / "runs", csrf_token="t"), base_url="http://127.0.0.1")
    for row, label in (("r1", "incorrect"), ("r1", "correct"), ("r4", "incorrect"), ("r5", "unsure")):
        r = viewer.post(  # labelled in `proctor view`: the latest label of a row counts, "unsure" does not
            f"/runs/{run_dir.name}/labels",
            json={"item_id": keys[row], "label": label, "annotator": "ann", "note": ""},
            headers={"X-CSRF-Token": "t", "Origin": "http://127.0.0.1"},
        )
        assert r.status_code == 200, r.text
    assert "judged_answer" in viewer.get(f"/runs/{run_dir.name}/items").text
    invoke(str(answers), "--out", str(tmp_path / "runs"), "--resume")
    with load_run(run_dir) as run:
        assert isinstance(run.result, JudgeResult) and run.result.card is not None
        card = run.result.card
        assert run.result.labelled == 2 and card.n == 2
        assert card.confusion == {
            "correct": {"correct": 1, "incorrect": 0},
            "incorrect": {"correct": 1, "incorrect": 0},
        }


def test_resume_reuses_the_stored_verdicts(tmp_path: Path) -> None:
    answers = write_jsonl(tmp_path / "answers.jsonl")
    invoke(str(answers), "--out", str(tmp_path / "runs"))
    run_dir = only_run(tmp_path / "runs")
    first = (run_dir / "verdicts.csv").read_text(encoding="utf-8")

    def calls_recorded() -> int:
        with sqlite3.connect(run_dir / "run.sqlite") as db:
            return int(db.execute("SELECT COUNT(*) FROM model_calls").fetchone()[0])

    assert calls_recorded() == 5
    CALLS.clear()
    invoke(str(answers), "--out", str(tmp_path / "runs"), "--resume")
    # Not even a cache hit: the stored judgments are handed back without a call.
    assert only_run(tmp_path / "runs") == run_dir and CALLS == [] and calls_recorded() == 5
    assert (run_dir / "verdicts.csv").read_text(encoding="utf-8") == first
    # An edited answer is judged anew on resume; the other rows keep their stored verdicts.
    rows = [json.loads(line) for line in answers.read_text(encoding="utf-8").splitlines()]
    rows[4]["answer"] = "Teal."
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    invoke(str(answers), "--out", str(tmp_path / "runs"), "--resume")
    assert len(CALLS) == 1 and "Teal." in CALLS[0] and calls_recorded() == 6
    with open(run_dir / "verdicts.csv", encoding="utf-8") as f:
        assert {r["id"]: r["verdict"] for r in csv.DictReader(f)}["r5"] == "correct"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor.cli.main", "judge", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd, env=dict(os.environ),
    )  # fmt: skip


def test_bad_field_and_bad_file_exit_2_with_the_fix(tmp_path: Path) -> None:
    answers = write_jsonl(tmp_path / "answers.jsonl", ("id", "q", "reference", "answer", "label"))
    r = cli(str(answers), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "no field 'question'" in r.stderr and "--field question=COLUMN" in r.stderr
    assert not (tmp_path / "runs").exists()  # reported before a run folder is made
    r = cli(str(answers), "--field", "questoin=q", cwd=tmp_path)
    assert r.returncode == 2 and "--field questoin=q" in r.stderr and "question, reference" in r.stderr
    r = cli(str(tmp_path / "missing.jsonl"), cwd=tmp_path)
    assert r.returncode == 2 and "missing.jsonl" in r.stderr and "not found" in r.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "reference": "r", "answer": "a", "label": "maybe"}) + "\n")
    r = cli(str(bad), cwd=tmp_path)
    assert r.returncode == 2 and "label 'maybe'" in r.stderr and "field 'label'" in r.stderr


def test_python_api_rule_without_a_model_call_and_batch_with_one() -> None:
    never = get_model("scripted/t32-never")
    v = proctor.judge(question="When?", reference="1342", answer="It was 1342.", model=never)
    assert isinstance(v, JudgedAnswer) and v.correct and v.decided_by == "rule" and not v.model_call
    CALLS.clear()
    rows = [{"question": r[1], "reference": r[2], "answer": r[3]} for r in ROWS]
    verdicts = proctor.judge_many(rows, model=get_model("scripted/t32-judge"))
    assert [v.verdict for v in verdicts] == [
        "correct",
        "incorrect",
        "incorrect",
        "correct",
        "incorrect",
        "correct",
    ]
    assert [v.decided_by for v in verdicts] == ["rule", "guard", "guard", "llm", "llm", "llm"] and len(
        CALLS
    ) == 5
    with pytest.raises(UserError, match=r"row 0 has no field 'answer'.*answer_field="):
        proctor.judge_many([{"question": "q", "reference": "r"}])


@pytest.mark.parametrize("name", ["dev", "heldout", "heldout2", "heldout3", "heldout4", "heldout5"])
def test_card_statistics_equal_bench_judge_agreement(name: str) -> None:
    """Fed the per-item verdicts bench/judge_agreement.py recorded, the card gives its kappa, interval,
    accuracy, false "correct" and share decided without a call."""
    bench = Path(__file__).resolve().parent.parent / "bench"
    report = json.loads((bench / "results" / f"judge_agreement_current_{name}.json").read_text())
    labels_path = bench.parent / report["labels"]
    labels = {
        json.loads(x)["id"]: json.loads(x)["label"] for x in labels_path.read_text().splitlines() if x.strip()
    }
    for r in report["results"]:
        pairs = []
        for item_id, it in r["items"].items():
            method = str(it["method"])
            pairs.append(
                (
                    labels[item_id],
                    JudgedAnswer(
                        verdict=it["verdict"], p_correct=it["p_correct"], method=method,
                        decided_by=decided_by(method, it["verdict"]), reason="",
                    ),
                )
            )  # fmt: skip
        card = judge_card(pairs, kappa_warning=0.6)
        assert card is not None
        want = r["all"]
        assert card.n == want["n"]
        assert card.kappa.value == pytest.approx(want["kappa"], abs=1e-6)
        assert [card.kappa.lo, card.kappa.hi] == pytest.approx(want["kappa_interval"], abs=1e-6)
        assert card.accuracy.value == pytest.approx(want["accuracy"], abs=1e-6)
        assert (
            card.false_correct.k == want["false_correct"]
            and card.false_incorrect.k == want["false_incorrect"]
        )
        assert card.decided_without_call.value == pytest.approx(want["decided_without_call"], abs=1e-4)


def test_config_file_with_a_relative_answers_path(tmp_path: Path) -> None:
    folder = tmp_path / "cfg"
    folder.mkdir()
    write_jsonl(folder / "answers.jsonl", ("key", "question", "reference", "answer", "label"))
    (folder / "judge.yaml").write_text(
        "protocol: judge\ncorpus: {}\nmodels: {j: scripted/t32-judge}\nroles: {judge: j}\n"
        "judge: {answers: {path: answers.jsonl}, kappa_warning: 0.2}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app, ["judge", "--config", str(folder / "judge.yaml"), "--field", "id=key", "--quiet",
              "--out", str(tmp_path / "runs")],
    )  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    with load_run(only_run(tmp_path / "runs")) as run:
        assert isinstance(run.result, JudgeResult) and run.result.card is not None
        assert run.result.card.kappa_warning == 0.2 and not run.result.card.below_threshold
        assert {r.question_id for _, r in run.payloads(JudgedRow)} == {f"r{i}" for i in range(1, 7)}
    other = tmp_path / "qa.yaml"
    other.write_text("protocol: qa\ncorpus: {}\nmodels: {m: scripted/t32-judge}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["judge", "--config", str(other)])
    assert isinstance(result.exception, UserError) and "not 'judge'" in str(result.exception)


def test_busy_seconds_counts_overlapping_calls_once() -> None:
    assert busy_seconds([]) == 0
    # two concurrent calls (0-10, 5-12), a gap, then one call (20-23): 12 + 3 seconds busy
    assert busy_seconds([(20.0, 23.0), (0.0, 10.0), (5.0, 12.0), (6.0, 7.0)]) == pytest.approx(15.0)
