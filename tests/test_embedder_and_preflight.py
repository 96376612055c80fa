"""The embedder named like a model (a spec, a key of `models`, or {spec, base_url, api_key_env} for an
OpenAI-compatible /embeddings endpoint, key from an environment variable only), and a suite that checks
every member's inputs — candidates, embedder, corpus, models — before its first member makes a call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from proctor.cli.main import app
from proctor.config import load_config
from proctor.embeddings.config import EmbedderConfig
from proctor.errors import UserError
from proctor.models.scripted import register_script
from proctor.runner import run_config
from proctor.testing.mock_server import MockServer, minimal_instance

SECRET = "sk-embed-secret-4f9a2c"
FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
    "Quillan": ("What colour are Quillan lanterns?", "green"),
}


def _examiner(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    for key, (q, a) in FACTS.items():
        if key in text:
            return json.dumps({"question": q, "answer": a})
    return "not json"


def _candidate(messages: list[dict[str, Any]], params: Any) -> str:
    return "It is " + ("Ostrid Kael" if "Ostrid Kael" in json.dumps(messages) else "unknown") + "."


def _judge(messages: list[dict[str, Any]], params: Any) -> str:
    return json.dumps({"reason": "checked", "verdict": "correct"})


register_script("emb-examiner", _examiner)
register_script("emb-candidate", _candidate)
register_script("emb-judge", _judge)


def _docs(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for key, (q, a) in FACTS.items():
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}.\n")


def _write(tmp_path: Path, config: dict[str, Any]) -> Path:
    _docs(tmp_path)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _qa(embedder: Any, models: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "protocol": "qa",
        "corpus": {"path": "docs", "min_chunk_chars": 10, "max_chunk_chars": 2000},
        "models": {
            "ex": "scripted/emb-examiner",
            "cand": "scripted/emb-candidate",
            "judge": "scripted/emb-judge",
            **(models or {}),
        },
        "roles": {"examiner": "ex", "judge": "judge"},
        "embedder": embedder,
        "candidates": [{"name": "dense", "model": "cand", "retriever": "dense", "k": 1}],
        "qa": {"num_questions": 3, "judges": ["with_reference"]},
    }


# --- the forms of `embedder` ------------------------------------------------------------------------------


def test_embedder_forms_resolve(tmp_path: Path) -> None:
    plain = load_config(_write(tmp_path, _qa("local/minilm")))
    assert plain.embedder_config() == EmbedderConfig(spec="local/minilm")
    served = {"emb": {"spec": "openai/e5", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "EMB_KEY"}}
    by_key = load_config(_write(tmp_path, _qa("emb", served)))
    ec = by_key.embedder_config()
    assert ec is not None and (ec.spec, ec.base_url, ec.api_key_env) == (
        "openai/e5",
        "http://127.0.0.1:9/v1",
        "EMB_KEY",
    )
    inline = load_config(_write(tmp_path, _qa(served["emb"])))
    assert inline.embedder_config() == ec.model_copy(update={"timeout_s": 60.0, "max_retries": 4})


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        ("minilm", r"embedder: 'minilm' is neither a key of `models` \['cand', 'ex', 'judge'\] nor a spec"),
        ("cand", r"embedder: models\.cand is 'scripted/emb-candidate', which does not embed"),
        (
            {"spec": "openai/e5", "api_key_env": "sk-abc-123"},
            r"field 'embedder\.api_key_env': must be the NAME",
        ),
        ({"spec": "openai/e5", "url": "http://x/v1"}, r"unknown field 'embedder\.url'"),
    ],
)
def test_embedder_mistakes_name_the_field(tmp_path: Path, embedder: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_config(_write(tmp_path, _qa(embedder)))


@pytest.mark.parametrize("form", ["inline", "models key"])
def test_dense_rag_embeds_through_an_openai_compatible_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    monkeypatch.setenv("T28_EMBED_KEY", SECRET)
    with MockServer() as server:
        spec = {"spec": "openai/mock-embed", "base_url": server.base_url, "api_key_env": "T28_EMBED_KEY"}
        config = _qa(spec) if form == "inline" else _qa("emb", {"emb": spec})
        config["cache_dir"] = str(tmp_path / "cache")
        result = run_config(_write(tmp_path, config), out=tmp_path / "runs", show_progress=False)
        embeds = [r for r in server.requests if r.path.endswith("/embeddings")]
    assert embeds, "the dense retriever embedded nothing through the endpoint"
    assert all(r.headers["Authorization"] == f"Bearer {SECRET}" for r in embeds)
    assert {r.body["model"] for r in embeds if r.body} == {"mock-embed"}
    for f in result.run_dir.iterdir():  # the key reaches no file of the run
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f.name


def test_embedder_key_variable_unset_is_a_user_error_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("T28_UNSET_KEY", raising=False)
    with MockServer() as server:
        spec = {"spec": "openai/mock-embed", "base_url": server.base_url, "api_key_env": "T28_UNSET_KEY"}
        with pytest.raises(UserError, match="T28_UNSET_KEY"):
            run_config(_write(tmp_path, _qa(spec)), out=tmp_path / "runs", show_progress=False)
        assert server.count == 0
    assert not (tmp_path / "runs").exists()


# --- a suite checks every member before the first runs ----------------------------------------------------


def _mock_reply(body: dict[str, Any]) -> str:
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema")
    if schema:
        return json.dumps(minimal_instance(schema))
    return "An answer."


def _suite(base_url: str, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    model = {"spec": "openai/mock", "base_url": base_url, "api_key_env": "T28_MODEL_KEY"}
    return {
        "protocol": "suite",
        "name": "pre",
        "corpus": {"path": "docs", "min_chunk_chars": 10, "max_chunk_chars": 2000},
        "models": {"m": model},
        "roles": {"examiner": "m", "judge": "m"},
        "embedder": {"spec": "openai/mock-embed", "base_url": base_url, "api_key_env": "T28_MODEL_KEY"},
        "candidates": candidates,
        "suite": {
            "members": [
                {
                    "protocol": "exam",
                    "exam": {"num_questions": 2, "labels": "rules", "irt": {"enabled": False}},
                },
                {"protocol": "qa", "qa": {"num_questions": 2, "judges": ["with_reference"]}},
            ]
        },
    }


def test_suite_with_a_bad_candidate_import_fails_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T28_MODEL_KEY", "sk-model")
    bad = [{"name": "llm", "model": "m"}, {"name": "mine", "python": "t28_no_such_module:answer"}]
    with MockServer(reply=_mock_reply) as server:
        path = _write(tmp_path, _suite(server.base_url, bad))
        r = subprocess.run(
            [sys.executable, "-m", "proctor.cli.main", "run", str(path), "--out", str(tmp_path / "runs")],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert server.count == 0  # the exam member (first) made no call
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    message = " ".join(r.stderr.split())
    assert "suite.members[0] (exam): candidates[1].python: importing 't28_no_such_module' failed" in message
    assert not (tmp_path / "runs").exists()


def test_suite_with_an_unset_header_variable_fails_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T28_MODEL_KEY", "sk-model")
    monkeypatch.delenv("T28_HEADER", raising=False)
    http = {"url": "http://127.0.0.1:9/answer", "headers_env": {"Authorization": "T28_HEADER"}}
    with MockServer(reply=_mock_reply) as server:
        path = _write(tmp_path, _suite(server.base_url, [{"name": "svc", "http": http}]))
        with pytest.raises(UserError, match=r"candidates\[0\]\.http\.headers_env: .*T28_HEADER is not set"):
            run_config(path, out=tmp_path / "runs", show_progress=False)
        assert server.count == 0


def test_suite_dry_run_plans_every_member_with_no_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T28_MODEL_KEY", "sk-model")
    with MockServer(reply=_mock_reply) as server:
        path = _write(tmp_path, _suite(server.base_url, [{"name": "llm", "model": "m"}]))
        r = CliRunner().invoke(app, ["run", str(path), "--dry-run"])
        assert server.count == 0
    assert r.exit_code == 0, r.output
    assert "Member exam of pre" in r.output and "Member qa of pre" in r.output
    assert r.output.count("Dry run of") == 2
    assert "pre-exam (exam)" in r.output and "pre-qa (qa)" in r.output


def test_suite_runs_from_the_cli_and_its_stored_config_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import proctor

    monkeypatch.setenv("T28_MODEL_KEY", "sk-model")
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    with MockServer(reply=_mock_reply) as server:
        path = _write(tmp_path, _suite(server.base_url, [{"name": "llm", "model": "m"}]))
        r = CliRunner().invoke(app, ["run", str(path), "--quiet", "--out", str(tmp_path / "runs")])
    assert r.exit_code == 0, r.output
    members = ("pre-qa-", "pre-exam-")
    suite_dir = next(p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(members))
    with proctor.load_run(suite_dir) as run:
        assert run.config.config_hash() == load_config(path).config_hash()


def test_a_seeded_suite_config_round_trips() -> None:
    from importlib import resources

    from proctor.config import RunConfig
    from proctor.config_paths import config_dir
    from proctor.kit.registry import get_protocol

    demo = get_protocol("suite").demo_config
    assert demo is not None
    raw = yaml.safe_load(
        demo.read_text().replace("${PROCTOR_DATA}", str(resources.files("proctor") / "data"))
    )
    assert any(m.get("seed_from") for m in raw["suite"]["members"])
    with config_dir(demo.parent):
        cfg = RunConfig.model_validate(raw)
        stored = cfg.model_dump(mode="json")
        stored["suite"] = stored.pop("settings")
        assert RunConfig.model_validate(stored).config_hash() == cfg.config_hash()


@pytest.mark.parametrize(
    ("roles", "qa", "missing"),
    [
        ({"judge": "judge"}, {"num_questions": 3, "judges": ["with_reference"]}, "examiner"),
        ({"examiner": "ex"}, {"num_questions": 3, "judges": ["with_reference"]}, "judge"),
    ],
)
def test_a_role_the_settings_need_is_refused_before_the_run_folder(
    tmp_path: Path, roles: dict[str, str], qa: dict[str, Any], missing: str
) -> None:
    """qa's examiner and judge are optional in general (questions from a file, no LLM judges) but needed
    by these settings: the run is refused before it makes a folder or a call."""
    config = _qa("local/all-minilm-l6-v2") | {"roles": roles, "qa": qa, "embedder": None}
    config["candidates"] = [{"name": "llm", "model": "cand"}]
    with pytest.raises(UserError, match=rf"roles\.{missing} is required by the qa protocol"):
        run_config(_write(tmp_path, config), out=tmp_path / "runs", show_progress=False)
    assert not (tmp_path / "runs").exists()


def test_a_role_the_settings_do_not_need_may_be_left_out(tmp_path: Path) -> None:
    config = _qa(None) | {"roles": {"examiner": "ex"}, "qa": {"num_questions": 3, "judges": []}}
    config["candidates"] = [{"name": "llm", "model": "cand"}]
    result = run_config(_write(tmp_path, config), out=tmp_path / "runs", show_progress=False)
    assert result.run_dir.is_dir()
