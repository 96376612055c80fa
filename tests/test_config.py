"""Config loading: valid configs load; every bad input is one UserError naming file, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.config import load_config
from proctor.errors import UserError

GOOD = """
protocol: qa
corpus: {path: docs}
models:
  a: scripted/x
  b: {spec: openai/gpt-4o-mini, api_key_env: MY_KEY, input_price_per_mtok: 0.15}
roles: {examiner: a, judge: a}
candidates:
  - {name: c1, model: b, retriever: bm25}
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "run.yaml"
    p.write_text(text)
    return p


def test_good_config_resolves_corpus_relative_to_file(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.corpus.path == (tmp_path / "docs").resolve()
    assert cfg.models["a"].spec == "scripted/x"
    assert cfg.models["b"].input_price_per_mtok == 0.15
    assert len(cfg.config_hash()) == 64


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (GOOD + "colour: red\n", ["unknown field 'colour'", "remove it"]),
        (GOOD.replace("retriever: bm25", "retriever: bm25, kk: 3"), ["unknown field 'candidates[0].kk'"]),
        ("protocol: qa\ncorpus: {path: d}\nmodels: {a: bogus/x}\n", ["models.a.spec", "openai/<model>"]),
        (GOOD.replace("model: b", "model: zz"), ["candidates[0].model", "'zz'"]),
        (GOOD.replace("examiner: a", "examiner: q"), ["roles.examiner", "'q'"]),
        (GOOD.replace("api_key_env: MY_KEY", "api_key_env: sk-abc123-secret"), ["api_key_env", "NAME"]),
        ("protocol: qa\n", ["field 'corpus' is required"]),
        (GOOD.replace("protocol: qa", "protocol: nope"), ["unknown protocol 'nope'", "qa"]),
        (GOOD + "qa: {num_questionz: 3}\n", ["unknown field 'qa.num_questionz'"]),
        (GOOD + "qa: {num_questions: 0}\n", ["qa.num_questions"]),
        ("protocol: [qa\n", ["invalid YAML", "line"]),
        ("- just\n- a list\n", ["must be a YAML mapping"]),
    ],
)
def test_bad_configs_name_the_field(tmp_path: Path, text: str, needles: list[str]) -> None:
    p = write(tmp_path, text)
    with pytest.raises(UserError) as e:
        load_config(p)
    msg = str(e.value)
    assert str(p) in msg
    for n in needles:
        assert n in msg, msg


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_every_file_path_resolves_relative_to_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "kieval.yaml").write_text(
        "protocol: kieval\ncorpus: {}\nmodels: {m: scripted/x}\n"
        "kieval: {questions: {path: data/seeds.jsonl}}\n"
    )
    (folder / "reckon.yaml").write_text(
        "protocol: reckon\ncorpus: {path: docs}\nmodels: {m: scripted/x}\n"
        "reckon: {human_labels: labels.jsonl, carry_over: ../units.jsonl}\n"
    )
    (folder / "exam.yaml").write_text(
        "protocol: exam\ncorpus: {path: docs}\nmodels: {m: scripted/x}\nexam: {exam_file: exams/e.jsonl}\n"
    )
    monkeypatch.chdir(tmp_path)  # run from elsewhere: the paths still point next to the config
    assert load_config(folder / "kieval.yaml").settings.questions.path == str(folder / "data/seeds.jsonl")
    reckon = load_config(Path("configs/reckon.yaml"))
    assert reckon.settings.human_labels == str(folder / "labels.jsonl")
    assert reckon.settings.carry_over == str(tmp_path / "units.jsonl")
    assert reckon.corpus.path == folder / "docs"
    assert load_config(folder / "exam.yaml").settings.exam_file == folder / "exams/e.jsonl"
