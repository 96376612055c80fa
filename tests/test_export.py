"""`proctor export`: a scripted qa run and exam run exported as inspect_ai eval logs (read back with
inspect_ai's own reader) and as JSONL, checked against the store; the errors a user can cause."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from proctor.export_format import ExportFormat
from proctor.kit.export import export_run, sample_specs
from proctor.kit.record import load_run
from proctor.runner import run_config
from proctor.store.export import SampleSpec, guess_specs, iter_samples, read_jsonl
from test_exam_protocol import exam_config  # noqa: F401  (the fixture)
from test_qa_protocol import qa_config  # noqa: F401  (the fixture)
from test_rageval import TEMPLATES  # (and its scripted agent LLM, rg-llm)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or dict(os.environ),
    )


@pytest.fixture
def qa_run(qa_config: Path, tmp_path: Path) -> Path:  # noqa: F811
    return run_config(qa_config, out=tmp_path / "runs", show_progress=False).run_dir


def _expected_messages(run_dir: Path, key: str, question: str, answer: str | None) -> list[tuple[str, str]]:
    """What the sample's conversation must be: the candidate's last call as stored (prompt + reply), or
    the question and the answer where the store holds no text."""
    with load_run(run_dir) as run:
        calls = [c for c in run.transcripts(key) if c.role == "candidate"]
    last = calls[-1] if calls else None
    if last is not None and last.messages is not None:
        reply = [] if last.reply is None else [("assistant", last.reply)]
        return [(m.role, m.content) for m in last.messages] + reply
    return [("user", question)] + ([("assistant", answer)] if answer is not None else [])


def test_qa_run_exports_an_inspect_log_that_inspect_ai_reads_back(qa_run: Path) -> None:
    r = cli("export", str(qa_run), "--format", "inspect")
    assert r.returncode == 0, r.stderr
    path = qa_run / "inspect" / f"{qa_run.name}.eval"
    assert str(path) in r.stdout
    log = read_eval_log(str(path))

    with load_run(qa_run) as run:
        items = {it.key: it for it in run.items(kind="answer")}
        judgments = {k: run.judgments(k) for k in items}
        n_calls = {k: len(run.calls(k)) for k in items}
        metrics = [m for m in run.metrics() if m.value is not None]
    assert log.status == "success"
    assert log.eval.task == "qa"
    assert log.eval.model == "scripted/qa-fail, scripted/qa-good"
    assert log.samples is not None and len(log.samples) == len(items) == 9
    assert log.eval.dataset.samples == 9
    for s in log.samples:
        item = items[str(s.id)]
        assert s.metadata["kind"] == "answer" and s.metadata["candidate"] == item.data["candidate"]
        assert s.input == item.data["question"]
        assert s.target == item.data["reference_answer"]
        answer = item.data.get("answer") if item.status == "done" else None
        expected = _expected_messages(qa_run, item.key, item.data["question"], answer)
        assert [(m.role, m.text) for m in s.messages] == expected
        # The run stored text: the conversation is the candidate's prompt (system + user), not a stand-in.
        assert [m.role for m in s.messages][:2] == ["system", "user"]
        # Every call made for the item (the candidate's and the judges') is in the sample's transcript.
        model_events = [e for e in s.events if e.event == "model"]
        assert len(model_events) == n_calls[item.key]
        ok = [j for j in judgments[item.key] if j.error is None]
        assert set(s.scores or {}) == {j.judge for j in ok}
        for j in ok:
            score = (s.scores or {})[j.judge]
            assert score.value == j.score
            assert score.explanation == j.reason
            assert (score.metadata or {})["verdict"] == j.verdict
        failed = {j.judge for j in judgments[item.key] if j.error}
        assert set(s.metadata["judge_errors"]) == failed
        if item.status == "done":
            assert s.output.completion == item.data["answer"]
            assert s.error is None
        else:
            assert s.error is not None and s.error.message == item.error
    # The judged answers that failed with the without-reference judge (Quillan) carry it as an error.
    assert sum(bool(s.metadata["judge_errors"]) for s in log.samples) == 2
    # The run's metrics are the log's results, per subject.
    assert log.results is not None
    got = {(sc.name, name): m.value for sc in log.results.scores for name, m in sc.metrics.items()}
    assert got == {(m.name, m.subject): m.value for m in metrics}


def test_json_log_and_jsonl_round_trip(qa_run: Path, tmp_path: Path) -> None:
    done = export_run(qa_run, ExportFormat.inspect, tmp_path / "out" / "qa.json")
    assert done.samples == 9
    assert len(read_eval_log(str(done.path)).samples or []) == 9

    r = cli("export", str(qa_run), "--format", "jsonl", "--out", str(tmp_path / "qa.jsonl"))
    assert r.returncode == 0, r.stderr
    back = read_jsonl(tmp_path / "qa.jsonl")
    with load_run(qa_run) as run:
        direct = list(iter_samples(run, sample_specs(run, run.protocol)))
        assert back == direct
        assert {s.key for s in back} == {it.key for it in run.items(kind="answer")}
        for s in back:
            assert s.judgments == run.judgments(s.key)
            assert [c.id for c in s.calls] == [c.id for c in run.calls(s.key)]
            assert {c.role for c in s.calls} <= {"candidate", "judge"}
    plain = [json.loads(line) for line in (tmp_path / "qa.jsonl").read_text().splitlines()]
    fields = {"key", "kind", "candidate", "question", "reference", "answer", "judgments", "calls"}
    assert fields <= set(plain[0])


def test_exam_responses_are_multiple_choice_samples(exam_config: Path, tmp_path: Path) -> None:  # noqa: F811
    run_dir = run_config(exam_config, out=tmp_path / "runs", show_progress=False).run_dir
    done = export_run(run_dir, ExportFormat.inspect)
    log = read_eval_log(str(done.path))
    with load_run(run_dir) as run:
        questions = {it.data["id"]: it.data for it in run.items(kind="exam_question")}
        responses = {it.key: it for it in run.items(kind="exam_response")}
    assert log.eval.task == "exam"
    assert log.samples is not None and len(log.samples) == len(responses) > 0
    graded = 0
    for s in log.samples:
        item = responses[str(s.id)]
        q = questions[item.data["question_id"]]
        assert s.input == q["question"] and s.choices == q["choices"] and s.target == q["answer"]
        assert s.metadata["candidate"] == item.data["pipeline"]
        if item.data.get("correct") is not None:
            graded += 1
            assert s.output.completion == item.data["selected"]
            assert (s.scores or {})["correct"].value == float(item.data["correct"])
        else:
            assert not s.scores
    assert graded > 0


def test_protocol_without_declared_samples_is_read_off_the_store(qa_run: Path) -> None:
    with load_run(qa_run) as run:
        assert guess_specs(run) == [SampleSpec("answer")]


def test_errors_a_user_can_cause(tmp_path: Path, qa_run: Path) -> None:
    r = cli("export", str(tmp_path / "nowhere"), "--format", "jsonl")
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert "not a run folder" in r.stderr

    r = cli("export", str(qa_run), "--format", "inspect", "--out", str(tmp_path / "log.txt"))
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert "`.eval`" in r.stderr and not (tmp_path / "log.txt").exists()

    # Without inspect_ai (a package that fails to import, first on the path): the fix is named.
    shadow = tmp_path / "shadow" / "inspect_ai"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('inspect_ai is not installed')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), env.get("PYTHONPATH", "")])
    r = cli("export", str(qa_run), "--format", "inspect", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert "pip install 'proctor[export]'" in r.stderr
    assert not (qa_run / "inspect").exists()


def test_run_without_text_exports_the_exchange_as_the_items_record_it(
    qa_config: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    qa_config.write_text(qa_config.read_text() + "store_text: false\n")
    run_dir = run_config(qa_config, out=tmp_path / "runs", show_progress=False).run_dir
    samples = read_jsonl(export_run(run_dir, ExportFormat.jsonl).path)
    assert len(samples) == 9
    assert all(not c.text_stored and c.messages is None and c.reply is None for s in samples for c in s.calls)
    assert any(s.calls for s in samples)
    log = read_eval_log(str(export_run(run_dir, ExportFormat.inspect).path))
    by_key = {s.key: s for s in samples}
    for s in log.samples or []:
        sample = by_key[str(s.id)]
        expected = [("user", sample.question)] + ([("assistant", sample.answer)] if sample.answer else [])
        assert [(m.role, m.text) for m in s.messages] == expected


def test_agent_answers_carry_their_trajectory_and_own_grades(tmp_path: Path) -> None:
    (tmp_path / "templates.yaml").write_text(TEMPLATES)
    cfg = tmp_path / "rageval.yaml"
    cfg.write_text(
        """
protocol: rageval
corpus: {}
models: {m: scripted/rg-llm}
rageval:
  templates: templates.yaml
  instances_per_template: 2
  documents: false
  grid: {workflows: [react], llms: [m]}
"""
    )
    run_dir = run_config(cfg, out=tmp_path / "runs", show_progress=False).run_dir
    log = read_eval_log(str(export_run(run_dir, ExportFormat.inspect).path))
    with load_run(run_dir) as run:
        answers = {it.key: it.data for it in run.items(kind="rageval_answer")}
        # Without the protocol's declaration the same kind is found from the store.
        assert [s.kind for s in guess_specs(run)] == ["rageval_answer"]
        transcripts = {k: run.transcripts(k) for k in answers}
    assert log.samples is not None and len(log.samples) == len(answers) == 4
    multi_step = 0
    for s in log.samples:
        data = answers[str(s.id)]
        assert s.input == data["question"] and s.target == data["gold"]
        assert s.output.completion == data["answer"]
        assert {k: v.value for k, v in (s.scores or {}).items()} == {"em": data["em"], "f1": data["f1"]}
        calls = transcripts[str(s.id)]
        assert len([e for e in s.events if e.event == "model"]) == len(calls) >= 1
        # The conversation is the last step's: its prompt holds the observations of the earlier steps.
        last = calls[-1]
        assert last.messages is not None
        assert [m.text for m in s.messages] == [m.content for m in last.messages] + [last.reply]
        if len(calls) > 1:
            multi_step += 1
            assert "Observation" in s.messages[-2].text or "Observation" in s.messages[0].text
    assert multi_step > 0
