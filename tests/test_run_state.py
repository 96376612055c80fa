"""Run state and logs: a run stopped by an error is `failed` in its store, its log and the viewer, and
resumes once fixed; `--resume` refuses a run whose stored config no longer validates; retries and rate
limits are log lines without secrets; off a terminal progress lines carry time, elapsed and ETA, and the
run folder is printed when the run starts."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from proctor.errors import UserError
from proctor.kit.progress import ProgressReporter, eta_text
from proctor.models.scripted import register_script
from proctor.runner import run_config
from proctor.testing.mock_server import MockServer
from proctor.viewer.rundir import list_runs

FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
}
CANARY = "sk-canary-3f9a1c7e5b2d4f60"


def _examiner(messages, params):
    text = messages[-1]["content"]
    for key, (q, a) in FACTS.items():
        if key in text:
            return json.dumps({"question": q, "answer": a})
    return json.dumps({"question": "What is this about at all?", "answer": "nothing"})


def _judge(messages, params):
    return json.dumps({"reason": "checked", "verdict": "correct"})


register_script("rs-examiner", _examiner)
register_script("rs-candidate", lambda messages, params: "Ostrid Kael")
register_script("rs-judge", _judge)


def leaky_answer(question: str) -> str:
    """A python candidate that logs the API key through proctor's logger (it must be blanked out)."""
    logging.getLogger("proctor").warning("candidate sees key %s", os.environ.get("RS_CANARY_KEY"))
    return "Ostrid Kael"


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for key, (q, a) in FACTS.items():
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)
    return docs


def _config(tmp_path: Path, *, corpus: str = "docs", candidate: str = "{name: c, model: cand}") -> Path:
    cfg = tmp_path / "qa.yaml"
    cfg.write_text(
        f"""
protocol: qa
corpus: {{path: {corpus}, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  ex: scripted/rs-examiner
  cand: scripted/rs-candidate
  judge: scripted/rs-judge
roles: {{examiner: ex, judge: judge}}
candidates:
  - {candidate}
qa: {{num_questions: 2, judges: [with_reference]}}
"""
    )
    return cfg


def _status(run_dir: Path) -> str:
    con = sqlite3.connect(run_dir / "run.sqlite")
    try:
        return con.execute("SELECT status FROM runs").fetchone()[0]
    finally:
        con.close()


def _only_run(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def test_input_errors_are_refused_before_a_run_folder_is_made(tmp_path: Path) -> None:
    """A missing corpus or a bad Python import path is found by the pre-flight check: nothing is created,
    so nothing is left marked running; after the fix the run goes ahead."""
    out = tmp_path / "runs"
    with pytest.raises(UserError, match="corpus"):
        run_config(_config(tmp_path), out=out, show_progress=False)  # docs/ does not exist yet
    _docs(tmp_path)
    bad = _config(tmp_path, candidate="{name: c, python: 'no_such_module_xyz.answers:answer'}")
    with pytest.raises(UserError, match="no_such_module_xyz"):
        run_config(bad, out=out, show_progress=False)
    assert not out.exists() or not any(out.iterdir())
    done = run_config(_config(tmp_path), out=out, show_progress=False)
    assert _status(done.run_dir) == "finished"


def test_a_user_error_inside_the_run_marks_it_failed_and_resume_after_the_fix_finishes_it(
    tmp_path: Path,
) -> None:
    cfg = _config(tmp_path)
    (tmp_path / "docs").mkdir()  # exists, so the pre-flight check passes; empty, so reading it fails
    out = tmp_path / "runs"
    with pytest.raises(UserError) as e:
        run_config(cfg, out=out, show_progress=False)
    run_dir = _only_run(out)
    assert _status(run_dir) == "failed"
    log = (run_dir / "proctor.log").read_text()
    assert "ERROR" in log and f"run {run_dir.name} failed" in log
    assert str(e.value).split(".")[0] in log  # the one-paragraph message itself
    (listed,) = list_runs(out)
    assert listed.status == "failed" and listed.failure and "corpus" in listed.failure.lower()

    _docs(tmp_path)
    again = run_config(cfg, out=out, resume=True, show_progress=False)
    assert again.run_dir == run_dir  # the failed run is the one resumed
    assert _status(run_dir) == "finished"
    assert again.summary["candidates"]["c"]["answered"] == 2
    assert list_runs(out)[0].failure is None


def test_an_unexpected_exception_marks_the_run_failed_with_its_traceback(tmp_path: Path) -> None:
    def boom(messages, params):
        raise ZeroDivisionError("scripted bug")

    register_script("rs-boom", boom)
    _docs(tmp_path)
    cfg = _config(tmp_path)
    cfg.write_text(cfg.read_text().replace("scripted/rs-examiner", "scripted/rs-boom"))
    out = tmp_path / "runs"
    with pytest.raises(ZeroDivisionError):
        run_config(cfg, out=out, show_progress=False)
    run_dir = _only_run(out)
    assert _status(run_dir) == "failed"
    log = (run_dir / "proctor.log").read_text()
    assert "ZeroDivisionError: scripted bug" in log and "Traceback" in log


def test_resume_refuses_a_run_whose_stored_config_no_longer_validates(tmp_path: Path) -> None:
    _docs(tmp_path)
    cfg = _config(tmp_path)
    out = tmp_path / "runs"
    first = run_config(cfg, out=out, show_progress=False)
    con = sqlite3.connect(first.run_dir / "run.sqlite")
    stored = json.loads(con.execute("SELECT config_json FROM runs").fetchone()[0])
    stored["qa"] = {"num_questions": 2, "retired_option": True}  # what an older proctor might have had
    stored.pop("settings", None)
    con.execute("UPDATE runs SET config_json=?", (json.dumps(stored),))
    con.commit()
    con.close()
    with pytest.raises(UserError) as e:
        run_config(cfg, out=out, resume=True, show_progress=False)
    msg = str(e.value)
    assert "--resume" in msg and "no longer validates" in msg and "retired_option" in msg
    assert "\n" not in msg
    assert _status(first.run_dir) == "finished"  # untouched


def test_retries_and_rate_limits_are_logged_without_the_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RS_CANARY_KEY", CANARY)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    _docs(tmp_path)
    with MockServer(fault_rate=1.0, fault_kinds=("429",), fault_first_n=1, retry_after_s=0.0) as server:
        cfg = tmp_path / "qa.yaml"
        cfg.write_text(
            f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  ex: {{spec: openai/mock, base_url: "{server.base_url}", api_key_env: RS_CANARY_KEY}}
  judge: scripted/rs-judge
roles: {{examiner: ex, judge: judge}}
candidates:
  - {{name: c, python: "test_run_state:leaky_answer"}}
qa: {{num_questions: 2, judges: [with_reference]}}
"""
        )
        result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
        faults = [r for r in server.chat_requests() if r.fault == "429"]
        # the key was sent (so it could have leaked) ...
        assert faults and all(r.headers.get("Authorization") == f"Bearer {CANARY}" for r in faults)
    log = (result.run_dir / "proctor.log").read_text()
    rate_limited = [line for line in log.splitlines() if "rate limited (HTTP 429)" in line]
    assert len(rate_limited) == len(faults)
    assert all("Retry-After 0s" in line and "attempt 1 of 5" in line for line in rate_limited)
    assert "role examiner" in rate_limited[0]
    # ... and never written: neither by the call path nor by code logging it through proctor's logger
    assert "candidate sees key ***" in log
    assert CANARY not in log
    assert CANARY not in (result.run_dir / "results.json").read_text()


def test_giving_up_is_logged(tmp_path: Path) -> None:
    _docs(tmp_path)
    with MockServer(fault_rate=1.0, fault_kinds=("500",)) as server:
        cfg = _config(tmp_path)
        text = cfg.read_text().replace(
            "cand: scripted/rs-candidate",
            f'cand: {{spec: openai/mock, base_url: "{server.base_url}", max_retries: 1}}',
        )
        cfg.write_text(text)
        result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    log = (result.run_dir / "proctor.log").read_text()
    assert re.search(
        r"WARNING openai/mock: http_500 \(role candidate, item answer_\w+\); attempt 1 of 2", log
    )
    assert re.search(r"ERROR openai/mock: gave up after 2 attempts \(http_500\) \(role candidate", log)
    assert _status(result.run_dir) == "finished"  # failed items do not fail the run


STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "


def test_off_a_terminal_the_folder_comes_first_and_lines_carry_time_elapsed_eta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _docs(tmp_path)
    result = run_config(_config(tmp_path), out=tmp_path / "runs", show_progress=True)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"Run folder: {result.run_dir} (continue an interrupted run with --resume)"
    progress = err[1:]
    assert progress
    line = re.compile(
        STAMP + r"(?P<stage>[\w ()]+): (?P<done>\d+)/(?P<total>\d+) · elapsed \d+:\d\d:\d\d · "
        r"ETA (\?|\d+:\d\d:\d\d) · calls \d+ \(cached \d+, errors \d+\) · tokens [\d,]+ · \$\d+\.\d{4}"
    )
    for text in progress:
        assert line.fullmatch(text), text
    assert any(t.endswith(" · ETA 0:00:00") is False and "writing questions: 2/2" in t for t in progress)
    assert f"run folder: {result.run_dir.resolve()}" in (result.run_dir / "proctor.log").read_text()


def test_plain_line_format_and_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    from proctor.kit import progress as progress_mod

    now = [100.0]
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: now[0])
    buf = io.StringIO()
    live = {"calls": 1, "cached": 0, "errors": 0, "tokens": 10, "cost_usd": 0.0}
    with ProgressReporter(live, console=Console(file=buf, force_terminal=False)) as p:
        p.note("Run folder: runs/x")
        stage = p.stage("judging", 10)
        now[0] = 100.0 + progress_mod.LINE_INTERVAL_S + 5  # 15 s: 1 of 10 done -> 135 s to go
        stage.advance()
        stage.finish()
    lines = buf.getvalue().splitlines()
    assert lines[0] == "Run folder: runs/x"
    assert re.fullmatch(STAMP + r"judging: 1/10 · elapsed 0:00:15 · ETA 0:02:15 · calls 1 .*", lines[2])
    assert eta_text(0, 5, 10.0) == "?" and eta_text(5, 5, 10.0) == "0:00:00"
    assert eta_text(1, 3, 3600.0) == "2:00:00"
