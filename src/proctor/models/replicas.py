"""Several servers of one model behind one provider: least-outstanding-requests routing with failover.

    pool = ReplicaPool([OpenAICompatProvider("qwen", base_url=u, where=w) for u in urls], where=w)
    model = Model(pool, max_concurrency=16 * len(urls))

The pool is only a `Provider`: cache, limiter, retries, structured output, budget and accounting stay in
`Model`, so a model served by N replicas takes exactly the one call path of a model served by one.

Routing. Each request goes to the healthy replica with the fewest requests in flight (ties: round-robin
from the replica after the last one chosen, so the choice is deterministic given the order of calls and
sequential calls still spread). With equal replicas behind a shared concurrency cap this keeps every
server equally busy and sends more work to whichever answers faster; a replica that hangs stops getting
new requests once it holds its share of the in-flight ones, long before its requests time out.

Failover. A connection error, timeout, truncated body or 5xx from a replica marks it down for
`cooldown_s` and is re-raised as a `RetryableError` (message prefixed with the replica), so `Model`'s
retry loop backs off and retries, and the retry goes to another replica. After the cool-down a replica is
"half open": it gets one request at a time until one succeeds, so a server that is still dead costs one
failed attempt per cool-down rather than a wave of them. A 429 or a malformed body is counted but does
not mark the replica down (the server is alive, just busy or misbehaving once). When every replica is
down the least recently failed one is tried anyway: the pool never waits, and `Model` gives up after its
retries with the failure recorded on the item.

Identity (the cache key's and every step's work key's provider part). Replies must not depend on which
replica served them, nor on how many there are: a run with 1 replica and a run with 4 must hit the same
cache entries and resume the same work. So the pool's identity is its FIRST replica's identity,
unchanged: `local/` replicas name the weights' digest (never a port), and a list of base URLs is named
by its first URL — a pool `[a, b, c]` shares its cache with a plain `base_url: a`, and adding or removing
replicas after the first keeps every cached reply. The replicas must be the same model: their identities
may differ only in `base_url`, or the pool refuses them (a UserError naming the field), so the key still
tells different models apart. Reordering the list (a new first URL) starts a new cache, as pointing
`base_url` at another server always has.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from proctor.errors import UserError
from proctor.models.base import Provider
from proctor.models.retry import RetryableError
from proctor.models.types import GenerationParams, Message, RawReply

# Causes meaning "this server is unreachable or broken", not "this request was unlucky".
_DOWN_CAUSES = frozenset({"connection", "timeout", "truncated"})


def marks_replica_down(err: RetryableError) -> bool:
    """A connection error, timeout, truncated body or 5xx: the replica is taken out of rotation."""
    return err.cause in _DOWN_CAUSES or (err.status is not None and err.status >= 500)


@dataclass(frozen=True)
class ReplicaStats:
    """One replica's counters, for reports and benchmarks (`ReplicaPool.stats()`).

    calls: requests sent to it (retries included); ok: answered; failures: retryable failures (any cause);
    downs: times it was taken out of rotation; outstanding: in flight now; max_outstanding: most at once;
    down: out of rotation now (cooling down or half open after a failure)."""

    label: str
    calls: int
    ok: int
    failures: int
    downs: int
    outstanding: int
    max_outstanding: int
    down: bool


class _Replica:
    """Mutable routing state of one replica (guarded by the pool's lock)."""

    __slots__ = (
        "calls",
        "down_until",
        "downs",
        "failed_at",
        "failures",
        "index",
        "max_outstanding",
        "ok",
        "outstanding",
        "provider",
    )

    def __init__(self, index: int, provider: Provider) -> None:
        self.index = index
        self.provider = provider
        self.calls = self.ok = self.failures = self.downs = 0
        self.outstanding = self.max_outstanding = 0
        self.down_until: float | None = None  # None: healthy; else out of rotation until then
        self.failed_at = 0.0

    @property
    def label(self) -> str:
        """`replica 2 (http://host:8000/v1)`; the URL is read now (an embedded server gets its port late)."""
        url = getattr(self.provider, "base_url", None)
        return f"replica {self.index}" + (f" ({url})" if isinstance(url, str) and ":0/" not in url else "")

    def eligible(self, now: float) -> bool:
        if self.down_until is None:
            return True
        # Half open after the cool-down: one request at a time until one succeeds.
        return now >= self.down_until and self.outstanding == 0


class ReplicaPool:
    """A `Provider` spreading requests over several providers of the same model (see the module docs).

    `where` names the config field (for error messages); `cooldown_s` is how long a replica that failed
    with a connection error, timeout or 5xx stays out of rotation."""

    def __init__(self, replicas: list[Provider], *, where: str, cooldown_s: float = 5.0) -> None:
        if not replicas:
            raise UserError(f"{where}: a replica pool needs at least one server. List one or more base_url.")
        if cooldown_s < 0:
            raise ValueError(f"cooldown_s must be >= 0, got {cooldown_s}")
        first = replicas[0]
        base = _without_url(first.identity())
        for i, r in enumerate(replicas[1:], start=1):
            if _without_url(r.identity()) != base or (r.provider, r.model) != (first.provider, first.model):
                raise UserError(
                    f"{where}: replica {i} serves {r.provider}/{r.model} but replica 0 serves "
                    f"{first.provider}/{first.model}. Replicas must be servers of the same model; give each "
                    f"model its own entry under `models`."
                )
        self.where = where
        self.cooldown_s = cooldown_s
        self.provider = first.provider
        self.model = first.model
        self._replicas = [_Replica(i, p) for i, p in enumerate(replicas)]
        self._next = 0
        self._lock = threading.Lock()  # routing state is shared if the model is used from several loops

    # --- capabilities: the first replica's (replicas are the same model on the same kind of server) ---

    @property
    def replicas(self) -> list[Provider]:
        return [r.provider for r in self._replicas]

    @property
    def supports_json_schema(self) -> bool:
        return bool(self._replicas[0].provider.supports_json_schema)

    @supports_json_schema.setter
    def supports_json_schema(self, value: bool) -> None:
        # A provider turns it off when its server refuses JSON schemas; the pool does it for all of them.
        for r in self._replicas:
            r.provider.supports_json_schema = value

    @property
    def supports_prompt_logprobs(self) -> bool | None:
        return getattr(self._replicas[0].provider, "supports_prompt_logprobs", None)

    @property
    def supports_tools(self) -> bool | None:
        return getattr(self._replicas[0].provider, "supports_tools", None)

    @property
    def tools_note(self) -> str | None:
        return getattr(self._replicas[0].provider, "tools_note", None)

    def identity(self) -> dict[str, Any]:
        """The first replica's identity: independent of the number of replicas and of who answered."""
        return self._replicas[0].provider.identity()

    # --- routing ---

    def _pick(self) -> _Replica:
        now = time.monotonic()
        with self._lock:
            n = len(self._replicas)
            order = [self._replicas[(self._next + k) % n] for k in range(n)]
            healthy = [r for r in order if r.eligible(now)]
            if healthy:
                chosen = min(healthy, key=lambda r: r.outstanding)  # first in rotation order among ties
            else:  # all down: never wait; try the one that failed longest ago
                chosen = min(order, key=lambda r: (r.failed_at, r.index))
            self._next = (chosen.index + 1) % n
            chosen.calls += 1
            chosen.outstanding += 1
            chosen.max_outstanding = max(chosen.max_outstanding, chosen.outstanding)
            return chosen

    async def complete(self, messages: list[Message], params: GenerationParams) -> RawReply:
        r = self._pick()
        try:
            reply = await r.provider.complete(messages, params)
        except RetryableError as e:
            with self._lock:
                r.failures += 1
                if marks_replica_down(e):
                    now = time.monotonic()
                    if r.down_until is None or now >= r.down_until:  # was in rotation (or half open)
                        r.downs += 1
                    r.down_until, r.failed_at = now + self.cooldown_s, now
            raise RetryableError(
                f"{r.label}: {e}", cause=e.cause, status=e.status, retry_after=e.retry_after
            ) from e
        else:
            with self._lock:
                r.ok += 1
                r.down_until = None
            return reply
        finally:
            with self._lock:
                r.outstanding -= 1

    def stats(self) -> list[ReplicaStats]:
        """Per-replica counters, in replica order."""
        now = time.monotonic()
        with self._lock:
            return [
                ReplicaStats(
                    label=r.label,
                    calls=r.calls,
                    ok=r.ok,
                    failures=r.failures,
                    downs=r.downs,
                    outstanding=r.outstanding,
                    max_outstanding=r.max_outstanding,
                    down=not r.eligible(now),
                )
                for r in self._replicas
            ]

    def close(self) -> None:
        """Stop the replicas' own servers now (embedded `local/` servers), where they have any."""
        for r in self._replicas:
            close = getattr(r.provider, "close", None)
            if callable(close):
                close()

    async def aclose(self) -> None:
        """Close every replica's HTTP session, even when closing one of them fails."""
        first_error: BaseException | None = None
        for r in self._replicas:
            try:
                await r.provider.aclose()
            except Exception as e:
                first_error = first_error or e
        if first_error is not None:
            raise first_error


def _without_url(identity: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in identity.items() if k != "base_url"}
