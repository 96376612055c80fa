"""The Python API: `proctor.evaluate` / `aevaluate` take a path, a dict or a RunConfig, accept a function or
an object with `answer()` as a candidate, work in scripts and inside a running event loop (Jupyter), and
hand back the typed Run; the example file runs against the mock OpenAI-compatible server; the pytest
plugin's `proctor_run` fixture."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import runpy
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

import proctor
from proctor.config import CandidateConfig, CorpusConfig, ModelConfig, RunConfig
from proctor.errors import UserError
from proctor.kit.shared.answers import AnswerItem
from proctor.models.scripted import register_script
from proctor.protocols.qa.config import Config as QaSettings
from proctor.protocols.qa.result import QaResult
from proctor.python_ref import python_label
from proctor.testing.mock_server import MockServer

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "python_api.py"

FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
    "Quillan": ("What colour are Quillan lanterns?", "green"),
}


def _write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for key, (q, a) in FACTS.items():
        (folder / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)
    return folder


def _reference_reply(text: str) -> str | None:
    """The examiner's and the judge's replies, shared by the scripted models and the mock server."""
    if "Reference text:" in text:  # the examiner
        q, a = next(FACTS[k] for k in FACTS if k in text)
        return json.dumps({"question": q, "answer": a})
    if "<reference_answer>" in text:  # the judge: correct when the reference is in the answer
        ref = re.search(r"<reference_answer>\s*(.*?)\s*</reference_answer>", text, re.DOTALL)
        ans = re.search(r"<candidate_answer>\s*(.*?)\s*</candidate_answer>", text, re.DOTALL)
        ok = bool(ref and ans and ref.group(1).lower() in ans.group(1).lower())
        return json.dumps({"verdict": "correct" if ok else "incorrect"})
    return None


def _scripted(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    text = next(m["content"] for m in messages if m["role"] == "user")
    return _reference_reply(text) or "no idea"


register_script("api-ref", _scripted)


# Candidates: each knows the Velmora and Tarn facts, not Quillan's -> accuracy 2/3.
def knows_two(question: str) -> str:
    for key in ("Velmora", "Tarn"):
        if key in question:
            return f"That is {FACTS[key][1]}."
    return "They are red."


async def knows_two_async(question: str, choices: list[str] | None = None) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"text": knows_two(question), "contexts": ["from my index"]}


class Pipeline:
    """An object with an answer() method; its state (the questions seen) shows it is the object itself."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def answer(self, question: str) -> str:
        self.seen.append(question)
        return knows_two(question)


def _config(candidates: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "protocol": "qa",
        "corpus": {"path": "docs", "min_chunk_chars": 10, "max_chunk_chars": 2000},
        "models": {"ref": "scripted/api-ref"},
        "roles": {"examiner": "ref", "judge": "ref"},
        "candidates": candidates,
        "qa": {"num_questions": 3, "judges": ["with_reference"]},
        **extra,
    }


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder is a temporary one holding the corpus `docs/` (dict configs resolve against it)."""
    _write_corpus(tmp_path / "docs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _accuracy(run: proctor.Run, subject: str) -> float | None:
    return next(
        m.value for m in run.metrics() if m.name == "accuracy.llm_with_reference" and m.subject == subject
    )


def test_a_dict_config_with_a_function_candidate_gives_the_typed_run(in_tmp: Path) -> None:
    with proctor.evaluate(_config([{"name": "mine", "python": knows_two}]), progress=False) as run:
        assert isinstance(run, proctor.Run)
        assert run.folder.parent == in_tmp / "runs"  # out="runs" under the current folder
        assert (run.folder / "report.html").is_file()
        assert isinstance(run.result, QaResult)
        mine = run.result.candidates["mine"]
        assert mine.accuracy_with_reference is not None
        assert mine.accuracy_with_reference.value == pytest.approx(2 / 3)
        assert mine.model == f"python:{__name__}:knows_two"
        assert _accuracy(run, "mine") == pytest.approx(2 / 3)
        # The relative corpus path resolved against the current folder; the function is stored by its name.
        assert Path(run.config.corpus.path) == in_tmp / "docs"
        assert run.config.candidates[0].python == f"{__name__}:knows_two"
        texts = {a.answer for _, a in run.payloads(AnswerItem)}
        assert texts == {"That is Ostrid Kael.", "That is 1742.", "They are red."}


def test_a_run_config_built_in_code_with_an_async_function(in_tmp: Path) -> None:
    cfg = RunConfig(
        protocol="qa",
        corpus=CorpusConfig(path=in_tmp / "docs", min_chunk_chars=10, max_chunk_chars=2000),
        models={"ref": ModelConfig(spec="scripted/api-ref")},
        roles={"examiner": "ref", "judge": "ref"},
        candidates=[CandidateConfig(name="mine", python=knows_two_async)],
        settings=QaSettings(num_questions=3, judges=["with_reference"]),
    )
    with proctor.evaluate(cfg, out=in_tmp / "elsewhere", progress=False) as run:
        assert run.folder.parent == in_tmp / "elsewhere"
        assert _accuracy(run, "mine") == pytest.approx(2 / 3)
        answers = [a for _, a in run.payloads(AnswerItem)]
        assert len(answers) == 3 and {a.candidate for a in answers} == {"mine"}
        assert all(a.trace and a.trace["contexts"] == ["from my index"] for a in answers)


def test_an_object_with_an_answer_method_is_a_candidate(in_tmp: Path) -> None:
    pipeline = Pipeline()
    with proctor.evaluate(_config([{"name": "obj", "python": pipeline}]), progress=False) as run:
        assert _accuracy(run, "obj") == pytest.approx(2 / 3)
        assert sorted(pipeline.seen) == sorted(q for q, _ in FACTS.values())  # this very object answered
        assert run.config.candidates[0].python == f"{__name__}:Pipeline.answer"


def test_the_config_hash_of_an_in_code_candidate_is_its_name(in_tmp: Path) -> None:
    def hash_of(python: Any) -> str:
        return RunConfig.model_validate(_config([{"name": "c", "python": python}])).config_hash()

    # Stable across objects and processes (no ids in it), and different for a different function.
    assert hash_of(Pipeline()) == hash_of(Pipeline())
    assert hash_of(knows_two) == hash_of(f"{__name__}:knows_two")  # the same as its import path
    assert hash_of(knows_two) != hash_of(knows_two_async)
    assert python_label(Pipeline()) == f"{__name__}:Pipeline.answer"
    # A YAML config's import path is stored as written.
    cfg = RunConfig.model_validate(_config([{"name": "c", "python": "mypkg.rag:answer"}]))
    assert cfg.model_dump(mode="json")["candidates"][0]["python"] == "mypkg.rag:answer"


def test_resume_finds_the_run_of_the_same_in_code_config(in_tmp: Path) -> None:
    with proctor.evaluate(_config([{"name": "obj", "python": Pipeline()}]), progress=False) as first:
        pass
    with proctor.evaluate(
        _config([{"name": "obj", "python": Pipeline()}]), resume=True, progress=False
    ) as again:
        assert again.folder == first.folder


def test_config_mistakes_are_user_errors(in_tmp: Path) -> None:
    with pytest.raises(UserError, match=r"qa\.num_questionz"):
        proctor.evaluate({**_config([{"name": "m", "python": knows_two}]), "qa": {"num_questionz": 3}})
    with pytest.raises(
        UserError,
        match=r"candidates\[0\]\.python.: got the class Pipeline; pass an instance of it \(e\.g\. Pipe",
    ):
        proctor.evaluate(_config([{"name": "m", "python": Pipeline}]))
    with pytest.raises(UserError, match=r"neither callable nor has an answer\(\) method"):
        proctor.evaluate(_config([{"name": "m", "python": 42}]))
    # A bad import path keeps its message, naming the field.
    with pytest.raises(UserError, match=r"candidates\[0\]\.python: importing 'no_such_module_xyz' failed"):
        proctor.evaluate(_config([{"name": "m", "python": "no_such_module_xyz:answer"}]), progress=False)
    with pytest.raises(UserError, match="config file not found"):
        proctor.evaluate(in_tmp / "missing.yaml")
    with pytest.raises(TypeError, match="a YAML file's path, a dict or a RunConfig"):
        proctor.evaluate(42)  # type: ignore[arg-type]


def test_a_yaml_path_still_works(in_tmp: Path) -> None:
    (in_tmp / "pipe.py").write_text(
        "def answer(question):\n    return 'Ostrid Kael' if 'Velmora' in question else '?'\n"
    )
    (in_tmp / "cfg.yaml").write_text(
        json.dumps(_config([{"name": "file", "python": "pipe.py:answer"}]))  # JSON is YAML
    )
    with proctor.evaluate(str(in_tmp / "cfg.yaml"), progress=False) as run:
        assert _accuracy(run, "file") == pytest.approx(1 / 3)
        assert run.config.candidates[0].python == "pipe.py:answer"


def test_evaluate_inside_a_running_event_loop(in_tmp: Path) -> None:
    """What a Jupyter cell does: the sync API called while the caller's loop is running."""

    async def cell() -> float | None:
        asyncio.get_running_loop()  # a loop is running here, as in a notebook
        with proctor.evaluate(_config([{"name": "mine", "python": knows_two_async}]), progress=False) as run:
            return _accuracy(run, "mine")

    assert asyncio.run(cell()) == pytest.approx(2 / 3)


async def test_aevaluate_leaves_the_callers_loop_free(in_tmp: Path) -> None:
    """The candidate asks the caller's loop for its answer (a coroutine scheduled on it from proctor's
    thread): that only completes when `await aevaluate(...)` does not hold the loop."""
    loop = asyncio.get_running_loop()

    async def lookup(question: str) -> str:
        await asyncio.sleep(0)
        return knows_two(question)

    def via_callers_loop(question: str) -> str:
        return asyncio.run_coroutine_threadsafe(lookup(question), loop).result(timeout=60)

    with await proctor.aevaluate(
        _config([{"name": "loop", "python": via_callers_loop}]), progress=False
    ) as run:
        assert _accuracy(run, "loop") == pytest.approx(2 / 3)


def _mock_reply(body: dict[str, Any]) -> str:
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    answer = _reference_reply(text)
    if answer is not None:
        return answer
    return next((f"It is {a}." for key, (q, a) in FACTS.items() if q in text), "I do not know.")


def _run_example() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(EXAMPLE), run_name="__main__")
    return out.getvalue()


def test_the_example_runs_in_a_script_and_in_a_running_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(EXAMPLE.read_text().splitlines()) <= 35
    corpus = _write_corpus(tmp_path / "my_docs")
    monkeypatch.chdir(tmp_path)
    with MockServer(reply=_mock_reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("CORPUS", str(corpus))
        printed = _run_example()
        assert "mine: accuracy 0.0 " in printed  # "I don't know." to every question
        assert "rag: accuracy 1.0 " in printed  # the model with BM25 finds every fact
        assert "n=3" in printed and "report:" in printed
        chats = sum(1 for r in server.requests if r.path.endswith("/chat/completions"))
        assert chats > 0

        async def notebook_cell() -> str:
            return _run_example()

        again = asyncio.run(notebook_cell())
        assert again.splitlines()[:-1] == printed.splitlines()[:-1]  # the last line names the run folder
        # The second run came from the call cache: no new chat calls reached the server.
        assert sum(1 for r in server.requests if r.path.endswith("/chat/completions")) == chats
    assert len([p for p in (tmp_path / "runs").iterdir() if (p / "run.sqlite").is_file()]) == 2


def test_the_pytest_plugin_is_registered() -> None:
    names = {e.value for e in entry_points(group="pytest11")}
    assert "proctor.testing.pytest_plugin" in names


def test_the_proctor_run_fixture(pytester: pytest.Pytester) -> None:
    _write_corpus(pytester.path / "docs")
    pytester.makepyfile(
        test_user="""
        from proctor.models.scripted import register_script
        import test_api_support as s

        register_script("user-ref", s.scripted)

        def answer(question):
            return "Ostrid Kael" if "Velmora" in question else "no idea"

        def test_knowledge(proctor_run):
            run = proctor_run({
                "protocol": "qa",
                "corpus": {"path": "docs", "min_chunk_chars": 10, "max_chunk_chars": 2000},
                "models": {"ref": "scripted/user-ref"},
                "roles": {"examiner": "ref", "judge": "ref"},
                "candidates": [{"name": "mine", "python": answer}],
                "qa": {"num_questions": 3, "judges": ["with_reference"]},
            })
            acc = next(m for m in run.metrics() if m.name == "accuracy.llm_with_reference")
            print("ACC", acc.value, acc.n)
            assert acc.value >= 0.5, "the pipeline regressed"
        """
    )
    pytester.makepyfile(
        test_api_support=f"""
        import json
        FACTS = {FACTS!r}

        def scripted(messages, params):
            text = next(m["content"] for m in messages if m["role"] == "user")
            if "Reference text:" in text:
                q, a = next(FACTS[k] for k in FACTS if k in text)
                return json.dumps({{"question": q, "answer": a}})
            ok = "Ostrid Kael" in text.split("<candidate_answer>")[-1]
            return json.dumps({{"verdict": "correct" if ok else "incorrect"}})
        """
    )
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    kept = pytester.path / "kept-runs"
    result = pytester.runpytest("-s", f"--proctor-out={kept}", "test_user.py")
    # The fixture ran the evaluation and the test's own assertion on the Run failed as it should.
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ACC 0.333333 3*", "*AssertionError: the pipeline regressed*"])
    assert len(list(kept.iterdir())) == 1  # --proctor-out keeps the run
