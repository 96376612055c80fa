"""The embedder contract and what every backend shares: batching, normalisation and a persistent cache.

Backends implement `_compute(texts) -> float32 array`; `Embedder.embed` looks every text up in the cache
first (one batched query), computes only the misses (deduplicated, in batches) and stores them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from proctor.models.cache import CallCache, default_cache_dir

_CACHES: dict[Path, CallCache] = {}
_CACHES_LOCK = threading.Lock()


def embedding_cache(cache_dir: str | Path | None = None) -> CallCache:
    """The shared vector cache: `<cache_dir>/embeddings.sqlite`, table `embeddings`."""
    path = (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / "embeddings.sqlite"
    with _CACHES_LOCK:
        if path not in _CACHES:
            _CACHES[path] = CallCache(path, table="embeddings")
        return _CACHES[path]


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """L2-normalise rows in float32; all-zero rows stay zero instead of becoming NaN."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


def _encode(vec: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(vec, dtype="<f4").tobytes()).decode("ascii")


def _decode(blob: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(blob), dtype="<f4")


class Embedder:
    """Texts -> L2-normalised float32 rows, shape (n, dim). Create with `proctor.embeddings.get_embedder`."""

    spec: str

    def __init__(self, spec: str, *, batch_size: int, cache: CallCache | None, where: str) -> None:
        self.spec = spec
        self.batch_size = max(1, int(batch_size))
        self.cache = cache
        self.where = where
        self._dim: int | None = None
        self._key_prefix: bytes | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec})"

    # -- backend hooks ---------------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """What makes vectors differ (cache key part). Never includes credentials."""
        raise NotImplementedError

    def _compute(self, texts: list[str]) -> np.ndarray:
        """Embed one batch (at most `batch_size` texts) without caching; rows in input order."""
        raise NotImplementedError

    def _probe_dim(self) -> int:
        return int(self.embed(["dimension probe"]).shape[1])

    # -- public API ------------------------------------------------------------------------------------

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = self._probe_dim()
        return self._dim

    def _keys(self, texts: list[str]) -> list[str]:
        if self._key_prefix is None:
            ident = json.dumps(self.identity(), sort_keys=True, ensure_ascii=False)
            self._key_prefix = hashlib.sha256(ident.encode()).hexdigest().encode() + b"\0"
        prefix = self._key_prefix
        return [hashlib.sha256(prefix + t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts` (cached texts cost nothing; duplicates are computed once)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of strings, not a single string")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = self._keys(texts)
        found: dict[str, np.ndarray] = {}
        if self.cache is not None:
            found = {k: _decode(v) for k, v in self.cache.get_many(sorted(set(keys))).items()}
            if self._dim is not None:
                found = {k: v for k, v in found.items() if v.shape[0] == self._dim}
        missing: dict[str, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in found and k not in missing:
                missing[k] = t
        if missing:
            miss_keys = list(missing)
            for i in range(0, len(miss_keys), self.batch_size):
                chunk = miss_keys[i : i + self.batch_size]
                vecs = normalize_rows(self._compute([missing[k] for k in chunk]))
                if vecs.ndim != 2 or vecs.shape[0] != len(chunk):
                    raise ValueError(f"{self.spec}: backend returned {vecs.shape} for {len(chunk)} texts")
                if self._dim is None:
                    self._dim = int(vecs.shape[1])
                new = dict(zip(chunk, vecs, strict=True))
                found.update(new)
                if self.cache is not None:
                    self.cache.put_many({k: _encode(v) for k, v in new.items()})
        out = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
        if self._dim is None:
            self._dim = int(out.shape[1])
        return out

    def prime(self, texts: list[str], vectors: np.ndarray) -> int:
        """Store vectors of `texts` computed elsewhere by the same model (e.g. on Ray workers, which cannot
        share this process's cache file), so later `embed` calls on them are cache hits. Texts already in
        the cache keep their vectors. Returns how many were added; without a cache, does nothing."""
        vecs = normalize_rows(vectors)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise ValueError(f"{self.spec}: prime() got {vecs.shape} vectors for {len(texts)} texts")
        if self._dim is not None and len(texts) and vecs.shape[1] != self._dim:
            raise ValueError(f"{self.spec}: prime() got {vecs.shape[1]}-d vectors, expected {self._dim}")
        if self.cache is None or not texts:
            return 0
        keys = self._keys(list(texts))
        new: dict[str, str] = {}
        for i in range(0, len(keys), 5000):
            block = keys[i : i + 5000]
            cached = self.cache.get_many(sorted(set(block)))
            for j, k in enumerate(block, start=i):
                if k not in cached and k not in new:
                    new[k] = _encode(vecs[j])
        if new:
            self.cache.put_many(new)
        return len(new)

    def close(self) -> None:
        """Release backend resources (HTTP clients); the embedder stays usable."""
