"""`proctor metaeval RUN_DIR`: a scripted qa run, four answers labelled by hand in a JSONL file, imported by
the command; accuracy, kappa, confusion and the annotators' agreement equal hand-computed values, and the
results land in metaeval.json, the run store's metrics and the report. Bad input is one UserError."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from proctor.cli.main import app as cli_app
from proctor.cli.main import main as cli_main
from proctor.errors import UserError
from proctor.models.scripted import register_script
from proctor.runner import run_config
from proctor.store import RunStore
from proctor.viewer.labels import LabelStore

FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
    "Quillan": ("What colour are Quillan lanterns?", "green"),
    "Dorrow": ("How many bridges cross the Dorrow?", "seven"),
}
RIGHT = {"Velmora": "It was founded by Ostrid Kael.", "Tarn": "1742"}  # wrong on Quillan and Dorrow


def _examiner(messages, params):
    text = messages[-1]["content"]
    for key, (q, a) in FACTS.items():
        if key in text:
            return json.dumps({"question": q, "answer": a})
    return "not json"


def _candidate(messages, params):
    text = messages[-1]["content"]
    for key, reply in RIGHT.items():
        if key in text:
            return reply
    return "I believe it is nine, and red."


def _judge(messages, params):
    text = next(m["content"] for m in messages if m["role"] == "user")
    answer = re.search(r"<candidate_answer>(.*?)</candidate_answer>", text, re.DOTALL)
    got = answer.group(1).lower() if answer else ""
    ok = any(a in text and a.lower() in got for _, a in FACTS.values())
    return json.dumps({"reason": "checked", "verdict": "correct" if ok else "incorrect"})


register_script("mecli-examiner", _examiner)
register_script("mecli-cand", _candidate)
register_script("mecli-judge", _judge)


def _config(folder: Path) -> Path:
    docs = folder / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for key, (q, a) in FACTS.items():
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)
    cfg = folder / "mecli.yaml"
    cfg.write_text(
        """
protocol: qa
name: mecli
corpus: {path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}
models:
  ex: scripted/mecli-examiner
  cand: scripted/mecli-cand
  judge: scripted/mecli-judge
roles: {examiner: ex, judge: judge}
candidates:
  - {name: solo, model: cand}
qa: {num_questions: 4, judges: [with_reference]}
"""
    )
    return cfg


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("metaeval-cli")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROCTOR_CACHE_DIR", str(base / "cache"))
        return run_config(_config(base), out=base / "runs", show_progress=False).run_dir


def _keys(run_dir: Path) -> dict[str, str]:
    """fact -> item key of solo's answer to its question."""
    store = RunStore(run_dir / "run.sqlite")
    try:
        by_question = {it["data"]["question"]: it["key"] for it in store.items(kind="answer")}
    finally:
        store.close()
    return {fact: by_question[q] for fact, (q, _) in FACTS.items()}


def test_metaeval_command_matches_hand_computed_values(run_dir: Path, tmp_path: Path) -> None:
    keys = _keys(run_dir)
    store = RunStore(run_dir / "run.sqlite")
    verdicts = {f: store.get_judgment(k, "llm_with_reference")["verdict"] for f, k in keys.items()}
    store.close()
    assert verdicts == {
        "Velmora": "correct",
        "Tarn": "correct",
        "Quillan": "incorrect",
        "Dorrow": "incorrect",
    }
    # ana (the default annotator of lines without one) labels all four by hand; bo labels two.
    lines = [
        {"item_id": keys["Velmora"], "label": "correct", "time": 1.0},
        {"item_id": keys["Tarn"], "label": "correct", "time": 2.0},
        {"item_id": keys["Quillan"], "label": "incorrect", "time": 3.0},
        {"item_id": keys["Dorrow"], "label": "correct", "time": 4.0, "note": "close enough"},
        {"item_id": keys["Velmora"], "label": "correct", "annotator": "bo", "time": 5.0},
        {"item_id": keys["Tarn"], "label": "incorrect", "annotator": "bo", "time": 6.0},
    ]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("# hand labels\n" + "".join(json.dumps(x) + "\n" for x in lines))
    args = ["metaeval", str(run_dir), "--annotator", "ana", "--labels", str(labels)]
    result = CliRunner().invoke(cli_app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    assert "Imported 6 label(s)" in result.output and "llm_with_reference" in result.output
    # Human (ana) vs judge: (c, c) (c, c) (i, i) (c, i): accuracy 3/4; confusion (rows: human)
    # [[2, 1], [0, 1]];
    # p_o = 0.75, p_e = (3 * 2 + 1 * 2) / 16 = 0.5, kappa = (0.75 - 0.5) / (1 - 0.5) = 0.5.
    saved = json.loads((run_dir / "metaeval.json").read_text())
    assert saved["run_id"] == run_dir.name and saved["meta"]["annotator"] == "ana"
    llm = next(m for m in saved["meta"]["methods"] if m["method"] == "llm_with_reference")
    ag = llm["agreement"]
    assert (ag["n"], ag["categories"], ag["confusion"]) == (4, ["correct", "incorrect"], [[2, 1], [0, 1]])
    assert ag["accuracy"] == pytest.approx(0.75) and ag["kappa"] == pytest.approx(0.5)
    assert ag["kappa_lo"] <= ag["kappa"] <= ag["kappa_hi"]
    assert "0.750" in result.output and "0.500 [" in result.output
    # ana and bo share Velmora (c, c) and Tarn (c, i). Fleiss: P_V = 1, P_T = 0, P = 1/2; p_c = 3/4,
    # p_i = 1/4, P_e = 10/16; kappa = (1/2 - 10/16) / (6/16) = -1/3. Krippendorff: o_cc = 2, o_ci = o_ic = 1,
    # n_c = 3, n_i = 1, n = 4; D_o = 2, D_e = 2 * 3 * 1 / 3 = 2; alpha = 1 - 2/2 = 0.
    (group,) = saved["meta"]["groups"]
    assert group["agreement"]["items"] == 2
    assert group["agreement"]["fleiss_kappa"] == pytest.approx(-1 / 3)
    assert group["agreement"]["krippendorff_alpha"] == pytest.approx(0.0, abs=1e-12)
    # The run store's metrics, for results and the report.
    store = RunStore(run_dir / "run.sqlite")
    try:
        metrics = {(m["name"], m["subject"]): m for m in store.metrics()}
    finally:
        store.close()
    kappa = metrics[("metaeval.kappa", "llm_with_reference")]
    assert kappa["value"] == pytest.approx(0.5) and kappa["n"] == 4 and kappa["lo"] is not None
    assert metrics[("metaeval.accuracy", "llm_with_reference")]["value"] == pytest.approx(0.75)
    assert metrics[("metaeval.fleiss_kappa", "annotators:binary")]["value"] == pytest.approx(-1 / 3)
    assert ("metaeval.spearman", "f1") in metrics  # f1 gives numeric scores
    assert "metaeval.kappa" in (run_dir / "report.html").read_text()
    # Again with the same file: nothing new imported (same times), same numbers; older metaeval rows are
    # replaced, not piled up.
    again = CliRunner().invoke(cli_app, args)
    assert (
        again.exit_code == 0 and "Imported 0 label(s)" in again.output and "(6 already there)" in again.output
    )
    with LabelStore(run_dir) as ls:
        assert ls.count() == 6


def test_bad_run_dir_and_label_files_are_user_errors(run_dir: Path, tmp_path: Path) -> None:
    def error(*args: str) -> str:
        result = CliRunner().invoke(cli_app, ["metaeval", *args])
        assert isinstance(result.exception, UserError), (result.output, result.exception)
        return str(result.exception)

    missing = tmp_path / "nope"
    assert str(missing) in error(str(missing)) and "runs/<run_id>" in error(str(missing))
    assert "run.sqlite" in error(str(run_dir.parent))  # the folder of runs, not a run
    absent = tmp_path / "absent.jsonl"
    assert str(absent) in error(str(run_dir), "--labels", str(absent))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item_id": "x", "label": "correct"}\n{"item_id": "y", "label": "maybe"}\n')
    message = error(str(run_dir), "--labels", str(bad))
    assert str(bad) in message and "line 2" in message and "nothing was imported" in message
    notjson = tmp_path / "notjson.jsonl"
    notjson.write_text("item,label\n")
    assert "line 1" in error(str(run_dir), "--labels", str(notjson))
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "UTF-8" in error(str(run_dir), "--labels", str(binary))
    assert "zed" in error(str(run_dir), "--annotator", "zed")


def test_console_script_exits_2_with_one_paragraph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty-run").mkdir()
    monkeypatch.setattr(sys, "argv", ["proctor", "metaeval", str(tmp_path / "empty-run")])
    with pytest.raises(SystemExit) as stop:
        cli_main()
    assert stop.value.code == 2
    captured = capsys.readouterr()
    assert "run.sqlite" in captured.err and "Traceback" not in captured.err
