"""The embedded llama.cpp servers of a `local/` model with `replicas: N`, one per Ray actor, spread over the
cluster's nodes (`executor: ray`).

Why actors: an actor pins a server to a node and reserves its CPUs (`threads` per replica) in Ray's
scheduler, so replicas land where there is room (strategy SPREAD: on different nodes when there are
several) and are stopped with the run. Each actor runs the same `LocalServer` child process as the
in-process path (weights assembled from the pip chunk packages on that node), and hands back only its
base URL; the calls themselves go from the driver straight to the servers over HTTP, through the
`ReplicaPool` of `proctor.models.replicas` (least outstanding requests, failover) and the one `Model`
call path — cache, retries, budget and accounting stay in the driver.

`LocalServer` listens on 127.0.0.1. A replica on another node than the driver is therefore reached
through a small TCP relay the actor opens on its node's cluster address (`_TcpRelay`): the server stays
bound to loopback, and the relay is as reachable as Ray's own ports (no authentication: keep the cluster
network private, as Ray requires anyway). On the driver's node no relay is started.

Laziness and identity: `ray_local_model` wraps the providers `get_model` builds (same options, same
cache identity — the weights' digest, never a URL), so a run answered from the cache starts no actor at
all, and a run on Ray hits the cache entries of the same run made locally, and vice versa.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from proctor.config import ModelConfig, RayConfig
from proctor.errors import UserError
from proctor.models.base import Model, Provider
from proctor.models.local.provider import LocalProvider
from proctor.models.local.server import LocalServer, ServerSettings

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------- on the node


class _TcpRelay:
    """Accepts connections on `host` (a node's cluster address) and pipes each to 127.0.0.1:`port`."""

    def __init__(self, host: str, target_port: int) -> None:
        self.host = host
        self.target_port = target_port
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._run, name="proctor-replica-relay", daemon=True)

    def start(self) -> int:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self.port

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, self.host, 0))
            self.port = int(self._server.sockets[0].getsockname()[1])
        except BaseException as e:  # reported by start()
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def close(self) -> None:
        def stop() -> None:
            if self._server is not None:
                self._server.close()
            self._loop.stop()

        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(stop)
            self._thread.join(5)


class ServerActor:
    """Body of one replica's Ray actor: start the model's `LocalServer` on this node, report its URL.

    A plain class so it can be tested without Ray; `LocalReplicaSet` wraps it with `ray.remote`."""

    def __init__(self, model: str, settings: dict[str, Any], startup_timeout_s: float, replica: int) -> None:
        self.model = model
        self.settings = ServerSettings(**settings)
        self.startup_timeout_s = startup_timeout_s
        self.replica = replica
        self.server: LocalServer | None = None
        self.relay: _TcpRelay | None = None

    def start(self, driver_ip: str | None = None) -> str:
        """The server's OpenAI base URL as the driver reaches it (starting the server on first call)."""
        from proctor.models.local.weights import ensure_weights

        if self.server is None:
            weights = ensure_weights(self.model, where=f"replica {self.replica} of local/{self.model}")
            log_path = None
            if self.replica:
                from proctor.models.cache import default_cache_dir

                name = f"llama-server-{Path(weights).stem}-r{self.replica}.log"
                log_path = default_cache_dir() / "logs" / name
            self.server = LocalServer(
                weights, self.settings, startup_timeout_s=self.startup_timeout_s, log_path=log_path
            )
        address = self.server.start()
        node_ip = _node_ip()
        if driver_ip is None or node_ip is None or node_ip == driver_ip:
            return address + "/v1"
        if self.relay is None:
            port = int(address.rsplit(":", 1)[1])
            self.relay = _TcpRelay(node_ip, port)
            self.relay.start()
        return f"http://{node_ip}:{self.relay.port}/v1"

    def node(self) -> str | None:
        return _node_ip()

    def stop(self) -> None:
        if self.relay is not None:
            self.relay.close()
            self.relay = None
        if self.server is not None:
            self.server.close()


def _node_ip() -> str | None:
    try:
        import ray.util

        return str(ray.util.get_node_ip_address())
    except Exception:
        return None


# ------------------------------------------------------------------------------------------ the driver


class LocalReplicaSet:
    """N replica actors of one `local/` model, created and started on demand, stopped by `close()`."""

    def __init__(
        self,
        model: str,
        settings: ServerSettings,
        n: int,
        *,
        ray_settings: RayConfig | None = None,
        startup_timeout_s: float = 300.0,
        where: str = "model",
    ) -> None:
        self.model = model
        self.settings = settings
        self.n = n
        self.ray_settings = ray_settings or RayConfig()
        self.startup_timeout_s = startup_timeout_s
        self.where = where
        self._actors: dict[int, Any] = {}
        self._urls: dict[int, str] = {}
        self._lock = threading.Lock()

    def _actor(self, i: int) -> Any:
        from proctor.scale.ray_session import ensure_ray

        ray = ensure_ray(self.ray_settings)
        actor = self._actors.get(i)
        if actor is None:
            total = int(ray.cluster_resources().get("CPU", 0))
            if self.settings.threads * self.n > total:
                raise UserError(
                    f"{self.where}: {self.n} replicas of `threads` = {self.settings.threads} CPUs each need "
                    f"{self.settings.threads * self.n} CPUs, but the Ray cluster has {total}. Lower "
                    f"{self.where}.threads or {self.where}.replicas, or add nodes."
                )
            remote_cls = ray.remote(ServerActor)
            actor = remote_cls.options(
                num_cpus=self.settings.threads,
                scheduling_strategy="SPREAD",
                max_restarts=0,
            ).remote(self.model, asdict(self.settings), self.startup_timeout_s, i)
            self._actors[i] = actor
        return actor

    def base_url(self, i: int) -> str:
        """Replica `i`'s base URL, starting its actor and server if needed (blocking, bounded)."""
        with self._lock:
            if i in self._urls:
                return self._urls[i]
            actor = self._actor(i)
        import ray

        from proctor.scale.ray_session import unwrap_user_error

        timeout = self.startup_timeout_s + 120  # placement and weights assembly come first
        try:
            url = str(ray.get(actor.start.remote(_node_ip()), timeout=timeout))
        except ray.exceptions.GetTimeoutError:
            self.stop(i)
            raise UserError(
                f"{self.where}: replica {i} on Ray did not come up within {timeout:.0f}s (not placed, or the "
                f"server did not start). Check the cluster's free CPUs (each replica reserves `threads` = "
                f"{self.settings.threads}) and the server log on its node; or lower {self.where}.replicas."
            ) from None
        except Exception as e:
            self.stop(i)
            user = unwrap_user_error(e)
            if user is not None:
                raise user from None
            raise
        with self._lock:
            self._urls[i] = url
        log.info("%s: replica %d on Ray at %s", self.where, i, url)
        return url

    def start_all(self) -> list[str]:
        """Every replica's base URL; the actors start their servers in parallel."""
        with ThreadPoolExecutor(max_workers=self.n, thread_name_prefix="proctor-replica-start") as pool:
            return list(pool.map(self.base_url, range(self.n)))

    def stop(self, i: int) -> None:
        with self._lock:
            actor = self._actors.pop(i, None)
            self._urls.pop(i, None)
        if actor is None:
            return
        import ray

        with contextlib.suppress(Exception):
            ray.get(actor.stop.remote(), timeout=15)
        with contextlib.suppress(Exception):
            ray.kill(actor)

    def close(self) -> None:
        for i in list(self._actors):
            self.stop(i)


def start_local_replicas(
    spec_name: str,
    n: int,
    settings: ServerSettings | None = None,
    *,
    ray_settings: RayConfig | None = None,
    startup_timeout_s: float = 300.0,
) -> tuple[list[str], LocalReplicaSet]:
    """Start `n` servers of `local/<spec_name>` as Ray actors (SPREAD over the nodes) and return their base
    URLs and the set (call `.close()` to stop them)."""
    replica_set = LocalReplicaSet(
        spec_name,
        settings or ServerSettings(),
        n,
        ray_settings=ray_settings,
        startup_timeout_s=startup_timeout_s,
    )
    try:
        return replica_set.start_all(), replica_set
    except BaseException:
        replica_set.close()
        raise


class _ActorServer(LocalServer):
    """The `LocalServer` face of one replica actor, so `LocalProvider`'s lazy start path works unchanged."""

    def __init__(self, replicas: LocalReplicaSet, index: int, weights_name: str) -> None:
        super().__init__(Path(weights_name), replicas.settings, startup_timeout_s=replicas.startup_timeout_s)
        self.replicas = replicas
        self.index = index

    @property
    def running(self) -> bool:
        return self.address is not None

    def start(self) -> str:
        with self._lock:
            if self.address is None:
                self.address = self.replicas.base_url(self.index).removesuffix("/v1")
            return self.address

    def close(self) -> None:
        with self._lock:
            self.address = None
        self.replicas.stop(self.index)


class RayLocalProvider(LocalProvider):
    """A `local/` replica whose server runs in a Ray actor: same identity, options and lazy start."""

    def __init__(self, base: LocalProvider, replicas: LocalReplicaSet) -> None:
        super().__init__(
            base.packaged,
            base.settings,
            timeout_s=base.timeout_s,
            startup_timeout_s=base.startup_timeout_s,
            where=base.where,
            replica=base.replica,
        )
        self.replicas = replicas

    def ensure_server(self) -> str:
        with self._prepare_lock:
            if self.server is None:
                self.server = _ActorServer(self.replicas, self.replica, self.packaged.name)
        self.base_url = self.server.base_url
        return self.base_url

    async def aclose(self) -> None:
        """Close the HTTP session and stop this replica's actor (the run is over); a later call starts a
        new one."""
        await super().aclose()
        server = self.server
        if server is not None:
            await asyncio.to_thread(server.close)


def ray_local_model(model: Model, cfg: ModelConfig, ray_settings: RayConfig, *, where: str) -> Model:
    """`model` (as `get_model` built it for a `local/` spec with `replicas`) with every replica's server
    moved into a Ray actor; the pool, limiter, cache, retries and prices are kept."""
    from proctor.models.replicas import ReplicaPool

    provider = model.provider
    providers: list[Any] = provider.replicas if isinstance(provider, ReplicaPool) else [provider]
    if not all(isinstance(p, LocalProvider) for p in providers):
        raise UserError(f"{where}: only local/ models run their replicas on Ray; '{cfg.spec}' is not one.")
    first: LocalProvider = providers[0]
    replica_set = LocalReplicaSet(
        first.packaged.name,
        first.settings,
        len(providers),
        ray_settings=ray_settings,
        startup_timeout_s=first.startup_timeout_s,
        where=where,
    )
    on_ray: list[Provider] = [RayLocalProvider(p, replica_set) for p in providers]
    cooldown = provider.cooldown_s if isinstance(provider, ReplicaPool) else 5.0
    model.provider = ReplicaPool(on_ray, where=where, cooldown_s=cooldown)
    return model
