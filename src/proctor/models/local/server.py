"""The llama.cpp server: `python -m proctor.models.local_server` on a weights file, in a child process (so
llama.cpp's threads, memory and logging stay out of the caller's process), one per weights file and
settings, started on first use and stopped at exit."""

from __future__ import annotations

import atexit
import contextlib
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
from typing import IO

from proctor.errors import UserError
from proctor.models.cache import default_cache_dir

log = logging.getLogger(__name__)

DEFAULT_PARALLEL = 2
DEFAULT_CTX_PER_SLOT = 4096
_MAX_AUTO_PARALLEL = 8


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


_SERVERS: dict[tuple[str, ServerSettings, int], LocalServer] = {}
_SERVERS_LOCK = threading.Lock()


def get_server(weights: Path, settings: ServerSettings | None = None, replica: int = 0) -> LocalServer:
    """The process-wide server for these weights and settings (created, not started).

    `replica` tells apart the N servers of a model with `replicas: N` (same weights and settings, one
    process each); replica 0 is the server a model without replicas uses, so the two share it."""
    settings = settings or ServerSettings()
    key = (str(Path(weights).resolve()), settings, replica)
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None:
            log_path = None
            if replica:
                log_path = default_cache_dir() / "logs" / f"llama-server-{Path(weights).stem}-r{replica}.log"
            server = _SERVERS[key] = LocalServer(weights, settings, log_path=log_path)
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
