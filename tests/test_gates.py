"""Gates and regressions as a CI job meets them, through the `proctor` command line (`main()`, so exit
codes are the real ones: 0 pass, 1 a gate failed or a regression, 2 a user error).

Scripted models over a corpus of twenty one-fact documents on two topics (lighthouses, cheeses): a
candidate that knows everything passes a gate, one that knows two facts fails it; a candidate that
forgets the cheeses between two runs is flagged on the cheese topic and not on the lighthouses."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from proctor.cli.main import main
from proctor.config import RunConfig, load_config
from proctor.kit.record import load_run
from proctor.models.scripted import register_script
from proctor.runner import run_config

PLACES = ["Alder", "Brisk", "Corran", "Dunmere", "Elsby", "Fennick", "Garrow", "Holme", "Istry", "Jorvale"]
KEEPERS = ["Ada Voss", "Bram Kell", "Cora Lind", "Dov Hale", "Esk Moor", "Fia Rook", "Gil Pray", "Hob Lune",
           "Ivo Tarn", "Jen Mott"]  # fmt: skip
VALLEYS = ["Kelby", "Lorn", "Mistle", "Narrow", "Orrin", "Pellow", "Quarry", "Rusk", "Sallow", "Tiver"]
CAVES = ["Amber", "Basalt", "Cinder", "Dusk", "Ember", "Flint", "Garnet", "Hollow", "Iron", "Jade"]

# key word -> (topic, question, answer, the document's sentence)
FACTS: dict[str, tuple[str, str, str, str]] = {}
for place, keeper in zip(PLACES, KEEPERS, strict=True):
    FACTS[place] = (
        "lighthouse",
        f"Who keeps the lighthouse at {place} Point?",
        keeper,
        f"The lighthouse at {place} Point shines over the reef; its keeper is {keeper}.",
    )
for valley, cave in zip(VALLEYS, CAVES, strict=True):
    FACTS[valley] = (
        "cheese",
        f"In which cave is the blue cheese of {valley} valley aged?",
        f"{cave} Cave",
        f"The blue cheese of {valley} valley is made from curds and aged in {cave} Cave.",
    )


def examiner(messages, params):
    text = messages[-1]["content"]
    for _, question, answer, sentence in FACTS.values():
        if sentence in text:
            return json.dumps({"question": question, "answer": answer})
    return "not json"


def candidate(knows: set[str]):
    def reply(messages, params):
        text = messages[-1]["content"]
        for key, (_, question, answer, _) in FACTS.items():
            if question in text:
                return f"It is {answer}." if key in knows else "I do not know."
        return "I do not know."

    return reply


def judge(messages, params):
    text = next(m["content"] for m in messages if m["role"] == "user")
    ref = re.search(r"<reference_answer>\s*(.*?)\s*</reference_answer>", text, re.S)
    ans = re.search(r"<candidate_answer>\s*(.*?)\s*</candidate_answer>", text, re.S)
    ok = ref is not None and ans is not None and ref.group(1).lower() in ans.group(1).lower()
    return json.dumps({"reason": "compared", "verdict": "correct" if ok else "incorrect"})


ALL = set(FACTS)
register_script("gates-examiner", examiner)
register_script("gates-judge", judge)
register_script("gates-all", candidate(ALL))
register_script("gates-weak", candidate({"Alder", "Brisk"}))
# The regression: the baseline misses one lighthouse; the new version misses another lighthouse (a change
# the test must not flag) and every cheese (the regression it must flag).
register_script("gates-before", candidate(ALL - {"Alder"}))
register_script("gates-after", candidate(ALL - {"Brisk"} - set(VALLEYS)))


def _config(tmp_path: Path, candidates: dict[str, str], **extra: object) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for key, (_, _, _, sentence) in FACTS.items():
        (docs / f"{key.lower()}.md").write_text(sentence + "\n")
    models = {"ex": "scripted/gates-examiner", "judge": "scripted/gates-judge"}
    models |= {f"m-{name}": f"scripted/{script}" for name, script in candidates.items()}
    cfg = {
        "protocol": "qa",
        "name": "gates",
        "corpus": {"path": "docs", "min_chunk_chars": 10, "max_chunk_chars": 2000},
        "models": models,
        "roles": {"examiner": "ex", "judge": "judge"},
        "candidates": [{"name": name, "model": f"m-{name}"} for name in candidates],
        "qa": {"num_questions": len(FACTS), "judges": ["with_reference"]},
        **extra,
    }
    path = tmp_path / "qa.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def cli(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    """Run `proctor ARGS` in-process (the scripted models are registered here); exit code and output."""
    monkeypatch.setattr(sys, "argv", ["proctor", *args])
    capsys.readouterr()
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())  # rich's line breaks undone


@pytest.fixture
def qa_run(tmp_path: Path) -> Path:
    """A finished qa run: `good` answers all 20 questions right, `weak` 2 of them."""
    cfg = _config(tmp_path, {"good": "gates-all", "weak": "gates-weak"})
    return run_config(cfg, out=tmp_path / "runs", show_progress=False).run_dir


def test_proctor_run_exits_0_above_the_threshold_and_1_below(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _config(tmp_path, {"good": "gates-all", "weak": "gates-weak"})
    runs = str(tmp_path / "runs")
    code, text = cli(
        ["run", str(cfg), "--out", runs, "--quiet", "--fail-under", "acc[good]=0.8"], capsys, monkeypatch
    )
    assert code == 0, text
    assert "Gate acc[good]=0.8 passed" in text and "All 1 gate check(s) passed" in text
    # Both candidates gated: `weak` (2 of 20 right) fails, after the run and its report are written.
    code, text = cli(
        ["run", str(cfg), "--out", runs, "--quiet", "--fail-under", "acc=0.8"], capsys, monkeypatch
    )
    assert code == 1, text
    failed = text.split("Gate acc=0.8 failed:")[1]
    assert failed.startswith(" accuracy.llm_with_reference (`acc`) of 'weak' is 0.100")
    assert "[95% interval 0.0" in failed and "(n=20)" in failed and "the threshold 0.8" in failed
    assert "Gate acc=0.8 passed: accuracy.llm_with_reference (`acc`) of 'good' is 1.000" in text
    assert "1 of 2 gate check(s) failed" in text
    latest = sorted((tmp_path / "runs").iterdir())[-1]
    assert (latest / "report.html").is_file() and (latest / "results.json").is_file()


def test_lower_bound_by_default_point_value_on_request(
    qa_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `good`: 20 of 20, Wilson interval [0.839, 1]: 0.9 is above its lower bound, below its value.
    code, text = cli(["gate", str(qa_run), "--fail-under", "acc[good]=0.9"], capsys, monkeypatch)
    assert code == 1, text
    assert "the lower bound of its interval, 0.839, is below the threshold 0.9" in text
    assert "the interval is too wide to be sure" in text
    code, text = cli(
        ["gate", str(qa_run), "--fail-under", "acc[good]=0.9", "--gate-on", "value"], capsys, monkeypatch
    )
    assert code == 0, text
    assert "its value 1.000 reaches the threshold 0.9" in text
    # The full metric name works as the alias does; em.mean (exact match) is another metric.
    code, text = cli(
        ["gate", str(qa_run), "--fail-under", "accuracy.llm_with_reference[good]=0.8"], capsys, monkeypatch
    )
    assert code == 0, text


def test_unknown_metric_or_subject_is_exit_2_naming_what_the_run_has(
    qa_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, text = cli(["gate", str(qa_run), "--fail-under", "acuracy=0.5"], capsys, monkeypatch)
    assert code == 2, text
    assert "no metric 'acuracy'" in text
    assert "accuracy.llm_with_reference" in text and "em.mean" in text and "f1.mean" in text
    code, text = cli(["gate", str(qa_run), "--fail-under", "acc[nobody]=0.5"], capsys, monkeypatch)
    assert code == 2 and "no subject 'nobody'" in text and "'good'" in text and "'weak'" in text
    code, text = cli(["gate", str(qa_run), "--fail-under", "acc>0.5"], capsys, monkeypatch)
    assert code == 2 and "METRIC=VALUE" in text
    code, text = cli(["gate", str(qa_run)], capsys, monkeypatch)
    assert code == 2 and "no gates" in text


def test_gates_section_of_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = [
        {"metric": "acc", "min": 0.8, "subject": "good"},
        {"metric": "em.mean", "min": 0.5, "on": "value"},
    ]
    cfg = _config(tmp_path, {"good": "gates-all", "weak": "gates-weak"}, gates=gates)
    # Gates do not change what is measured: the config hash (and so --resume) ignores them.
    loaded = load_config(cfg)
    assert loaded.gates[1].on == "value" and loaded.gates[0].on == "lower"
    assert loaded.config_hash() == loaded.model_copy(update={"gates": []}).config_hash()
    code, text = cli(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"], capsys, monkeypatch)
    assert code == 1, text
    # em.mean (exact match): "It is Ada Voss." is not the reference, so every candidate's em is 0.
    assert "Gate em.mean=0.5 failed: em.mean of 'good' is 0.000" in text
    assert "Gate acc[good]=0.8 passed" in text
    run_dir = sorted((tmp_path / "runs").iterdir())[-1]
    # `proctor gate` reads the run's own gates too, and --gate-on overrides how every gate compares.
    code, text = cli(["gate", str(run_dir), "--gate-on", "lower"], capsys, monkeypatch)
    assert code == 1 and "em.mean=0.5 failed" in text
    with pytest.raises(Exception, match=r"gates\.0\.min"):
        RunConfig.model_validate({**yaml.safe_load(cfg.read_text()), "gates": [{"metric": "acc"}]})


# --- regressions ----------------------------------------------------------------------------------


def _suite(qa_dir: Path, folder: Path) -> Path:
    """A suite's run folder over one finished qa member, as the suite protocol records it (its result
    from the member's evidence and the knowledge map), with the topic model given: lighthouse documents
    are topic t1, cheese documents t2 (the real suite clusters chunk embeddings; that is not under test)."""
    from proctor.protocols.suite.evidence import member_evidence
    from proctor.protocols.suite.knowledge_map import build_map
    from proctor.protocols.suite.run import _member_run, _result
    from proctor.protocols.suite.topics import Topic, TopicModel
    from proctor.runner import record_composed_run

    with load_run(qa_dir) as run:
        chunks: dict[str, list[str]] = {"lighthouse": [], "cheese": []}
        for it in run.items("question", "done"):
            q = it.data
            topic = next(t for t, question, _, _ in FACTS.values() if question == q["question"])
            chunks[topic] += q["source_chunk_ids"]
        evidence = {"qa": member_evidence(run)}
        members = [_member_run("qa", run)]
        qa_cfg = run.config
    topics = TopicModel(
        k=2,
        k_rule="given",
        topics=[
            Topic(topic_id=t, name=name, terms=[word], chunk_ids=chunks[word], sources=[])
            for t, name, word in (("t1", "lighthouse keeper", "lighthouse"), ("t2", "cheese cave", "cheese"))
        ],
    )
    names = [c.name for c in qa_cfg.candidates]
    result = _result(topics, build_map(topics, names, evidence), evidence, members)
    data = qa_cfg.model_dump(mode="json", exclude={"settings", "protocol", "name"})
    data |= {"protocol": "suite", "name": "gsuite", "embedder": "local/all-minilm-l6-v2"}
    data["suite"] = {"members": [{"protocol": "qa", "qa": qa_cfg.settings.model_dump(mode="json")}]}
    return record_composed_run(RunConfig.model_validate(data), folder, result).run_dir


@pytest.fixture
def two_versions(tmp_path: Path) -> tuple[Path, Path]:
    """Two qa runs of the same questions: `bot` before and after it forgot the cheeses; `steady` the same
    in both."""
    out = tmp_path / "runs"
    before = run_config(
        _config(tmp_path / "a", {"bot": "gates-before", "steady": "gates-all"}), out=out, show_progress=False
    )
    after = run_config(
        _config(tmp_path / "b", {"bot": "gates-after", "steady": "gates-all"}), out=out, show_progress=False
    )
    return before.run_dir, after.run_dir


def test_suite_compare_flags_the_topic_that_got_worse_and_no_other(
    two_versions: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from proctor.gates import ALL_TOPICS, regressions

    qa_a, qa_b = two_versions
    suite_a = _suite(qa_a, tmp_path / "runs" / "gsuite-a")
    suite_b = _suite(qa_b, tmp_path / "runs" / "gsuite-b")
    with load_run(suite_a) as run:
        assert {m.subject for m in run.metrics()} >= {
            "bot @ t2 (cheese cave)",
            "steady @ t1 (lighthouse keeper)",
        }

    report = regressions(suite_a, suite_b)
    rows = {(r.candidate, r.topic): r for r in report.rows}
    assert set(rows) == {
        (c, t) for c in ("bot", "steady") for t in (ALL_TOPICS, "t1 (lighthouse keeper)", "t2 (cheese cave)")
    }
    cheese = rows[("bot", "t2 (cheese cave)")].delta
    assert (cheese.n, cheese.a, cheese.b, cheese.lost, cheese.gained) == (10, 1.0, 0.0, 10, 0)
    lighthouse = rows[("bot", "t1 (lighthouse keeper)")].delta
    assert (lighthouse.lost, lighthouse.gained, lighthouse.p_mcnemar) == (1, 1, 1.0)  # a swap, not a drop
    assert {(r.candidate, r.topic) for r in report.regressions} == {
        ("bot", "t2 (cheese cave)"),
        ("bot", ALL_TOPICS),
    }

    code, text = cli(["compare", str(suite_a), str(suite_b), "--fail-on-regression"], capsys, monkeypatch)
    assert code == 1, text
    assert "Regression: 'bot' on topic t2 (cheese cave) (mastery): 1.000 in run A, 0.000 in run B" in text
    assert "10 lost, 0 gained" in text and "< alpha 0.05" in text
    assert (
        "on topic t1" not in text.split("Regression:", 1)[1]
        and "'steady'" not in text.split("Regression:", 1)[1]
    )
    # Without --fail-on-regression the drop is shown and the exit is 0; a run against itself has none.
    code, text = cli(["compare", str(suite_a), str(suite_b)], capsys, monkeypatch)
    assert code == 0 and "Significant drop: 'bot' on topic t2" in text
    code, text = cli(["compare", str(suite_a), str(suite_a), "--fail-on-regression"], capsys, monkeypatch)
    assert code == 0 and "No significant drop" in text
    # A stricter alpha than the drop's p-value flags nothing.
    assert regressions(suite_a, suite_b, alpha=0.001).regressions == []

    # The baseline downloaded elsewhere (a CI artifact): members are found beside the suite's folder.
    moved = tmp_path / "baseline"
    moved.mkdir()
    shutil.move(str(suite_a), moved / suite_a.name)
    shutil.move(str(qa_a), moved / qa_a.name)
    code, text = cli(
        ["compare", str(moved / suite_a.name), str(suite_b), "--fail-on-regression"], capsys, monkeypatch
    )
    assert code == 1 and "'bot' on topic t2 (cheese cave)" in text


def test_run_compare_flags_the_candidate_per_judge(
    two_versions: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    qa_a, qa_b = two_versions
    code, text = cli(
        ["compare", str(qa_a), str(qa_b), "--fail-on-regression", "--alpha", "0.05"], capsys, monkeypatch
    )
    assert code == 1, text
    flagged = text.split("Regression:", 1)[1]
    assert "'bot' (llm_with_reference): 0.950 in run A, 0.450 in run B" in flagged
    assert "'steady'" not in flagged
    code, text = cli(["compare", str(qa_a), str(qa_b), "--alpha", "2"], capsys, monkeypatch)
    assert code == 2 and "between 0 and 1" in text


def test_example_workflow_is_valid_and_names_real_commands() -> None:
    import typer.main

    from proctor.cli.main import app

    path = Path(__file__).parents[1] / "examples" / "github-actions.yml"
    wf = yaml.safe_load(path.read_text())
    assert wf["jobs"] and (wf.get("on") or wf.get(True))  # PyYAML reads the key `on` as True
    steps = [s for job in wf["jobs"].values() for s in job["steps"]]
    # The call cache is restored before the run and saved after it, even when a gate failed.
    cache = {s["uses"].split("@")[0]: s for s in steps if s.get("uses", "").startswith("actions/cache/")}
    assert set(cache) == {"actions/cache/restore", "actions/cache/save"}
    assert all(s["with"]["path"] == "${{ env.PROCTOR_CACHE_DIR }}" for s in cache.values())
    assert "cancelled()" in cache["actions/cache/save"]["if"]
    assert "PROCTOR_CACHE_DIR" in wf["env"]
    group = typer.main.get_command(app)
    used = set()
    for s in steps:
        for line in s.get("run", "").replace("\\\n", " ").splitlines():
            words = line.split()
            if words[:1] != ["proctor"]:
                continue
            command = group.commands.get(words[1])  # type: ignore[attr-defined]
            assert command is not None, line
            options = {o for p in command.params for o in p.opts}
            assert {w for w in words if w.startswith("--")} <= options, line
            used.add(words[1])
    assert {"run", "compare"} <= used
    text = path.read_text()
    assert "--fail-under" in text and "--fail-on-regression" in text
