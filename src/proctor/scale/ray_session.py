"""Start or join Ray for a run, and never hang or crash with a traceback doing it.

`ensure_ray(settings)` is idempotent: when Ray is already initialised in this process (a test fixture, a
notebook, an earlier call) it is used as it is; otherwise a local instance is started (dashboard off, the
CPUs named explicitly) or the cluster at `ray.address` is joined. Failures become `UserError`s naming the
`ray:` field and the fix, which the CLI prints as one paragraph with exit code 2:

- `ray` not importable -> install the extra (`pip install 'proctor[ray]'`);
- nothing listening at `ray.address` -> checked with a plain TCP connect first, because `ray.init` on a dead
  address retries for minutes;
- joining a cluster not done within `ray.start_timeout_s` -> that `ray.init` runs in a daemon thread and is
  abandoned. A local instance is started on the calling thread instead: Ray ties its node processes to the
  starting thread (Linux parent-death signal), so a helper thread that ends would take them down; the
  local start has Ray's own timeouts.

`release_ray()` shuts down only an instance this module started, so a caller's own Ray stays up.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from types import ModuleType
from typing import Any

from proctor.config import RayConfig
from proctor.errors import UserError

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'proctor[ray]'"
_LOCK = threading.Lock()
_started_here = False


def import_ray(where: str = "executor") -> ModuleType:
    """The `ray` module, or a `UserError` saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise UserError(
            f"{where}: `executor: ray` needs Ray, which is not installed ({e}). Install it with "
            f"{INSTALL_HINT} (or ./install.sh), or set `executor: local` to run everything in this process."
        ) from None
    return ray


def ensure_ray(settings: RayConfig | None = None) -> ModuleType:
    """Ray, initialised: attach to the instance already running in this process, else start or join one."""
    global _started_here
    settings = settings or RayConfig()
    ray = import_ray()
    with _LOCK:
        if ray.is_initialized():
            return ray
        if settings.address and settings.address != "auto":
            _check_listening(settings.address)
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,  # workers' output stays in Ray's session logs, not the user's terminal
            "configure_logging": False,
            "ignore_reinit_error": True,
        }
        if settings.address:
            kwargs["address"] = settings.address
            _init_with_deadline(ray, kwargs, settings)
        else:
            kwargs["num_cpus"] = settings.num_cpus or os.cpu_count() or 1
            try:
                ray.init(**kwargs)
            except Exception as e:
                raise _start_failed(e, settings) from None
        _started_here = not settings.address
        _quiet_ray_data()
        log.info("ray %s: %s", "joined" if settings.address else "started", ray.cluster_resources())
        return ray


def release_ray() -> None:
    """Shut Ray down if `ensure_ray` started it (a local instance); leave a joined or a caller's Ray alone."""
    global _started_here
    with _LOCK:
        if not _started_here:
            return
        _started_here = False
        try:
            import ray
        except ImportError:  # pragma: no cover - it was importable when we started it
            return
        ray.shutdown()


def _check_listening(address: str) -> None:
    """Fail in seconds, not minutes, when nothing listens at `ray.address`."""
    host_port = address.removeprefix("ray://").rstrip("/")
    host, sep, port_s = host_port.rpartition(":")
    if not sep or not port_s.isdigit():
        raise UserError(
            f"ray.address: '{address}' is not a Ray address. Use 'auto' (the cluster this machine belongs "
            "to), 'host:6379' (a cluster's head node) or 'ray://host:10001' (Ray Client); or remove "
            "ray.address to start a local instance."
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port_s)), timeout=5):
            pass
    except OSError as e:
        raise UserError(
            f"ray.address: nothing answers at {host_port} ({e.strerror or e}). Start the cluster there "
            f"(`ray start --head` on the head node), correct ray.address, or remove it to start a local Ray "
            f"instance."
        ) from None


def _init_with_deadline(ray: ModuleType, kwargs: dict[str, Any], settings: RayConfig) -> None:
    outcome: dict[str, BaseException | None] = {}

    def target() -> None:
        try:
            ray.init(**kwargs)
            outcome["error"] = None
        except BaseException as e:  # reported to the caller below
            outcome["error"] = e

    thread = threading.Thread(target=target, name="proctor-ray-init", daemon=True)
    thread.start()
    thread.join(settings.start_timeout_s)
    where = f"the Ray cluster at {settings.address}" if settings.address else "a local Ray instance"
    if thread.is_alive():
        raise UserError(
            f"ray: could not start or join {where} within ray.start_timeout_s={settings.start_timeout_s:g}s. "
            "Check that the cluster is up and runs the same Ray and Python versions as this machine (its "
            "log: /tmp/ray/session_latest/logs), raise ray.start_timeout_s, or set `executor: local`."
        )
    error = outcome.get("error")
    if error is not None:
        raise _start_failed(error, settings) from None


def _start_failed(error: BaseException, settings: RayConfig) -> UserError:
    where = f"the Ray cluster at {settings.address}" if settings.address else "a local Ray instance"
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    return UserError(
        f"ray: could not start or join {where} ({type(error).__name__}: {first}). Check ray.address and "
        "ray.num_cpus, and that the cluster runs the same Ray and Python versions as this machine (its log: "
        "/tmp/ray/session_latest/logs); or set `executor: local`."
    )


def _quiet_ray_data() -> None:
    """No progress bars or per-dataset INFO lines from Ray Data on the user's terminal."""
    try:
        from ray.data import DataContext
    except ImportError:  # pragma: no cover - ray without the data extra; corpus_pipeline says so
        return
    ctx = DataContext.get_current()
    ctx.enable_progress_bars = False
    for name in ("ray.data", "ray"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Its one notice is that we turned the bars off ("Progress bars disabled ..."): not for the user.
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)


def unwrap_user_error(error: BaseException) -> UserError | None:
    """The `UserError` a Ray task raised, if that is what `error` wraps (Ray wraps task exceptions)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, UserError):
            return current
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__
    return None
