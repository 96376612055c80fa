"""Replica scaling: throughput of the one model-call path over N replicas of a slot-limited server.

    .venv/bin/python bench/replica_scaling.py      # N = 1, 2, 4, 8; 200 requests; 200 ms; 2 slots; 3 rounds

Each replica is a mock OpenAI-compatible server in its own process (`python -m proctor.testing.mock_server
--latency-ms 200 --slots 2`): like a llama.cpp server started with n_parallel=2, it works on two requests
at a time and queues the rest, so one replica serves at most slots / latency = 10 req/s, and N replicas
ideally N times that. The client is `get_model("openai/mock", base_url=[N URLs], max_concurrency=slots*N,
cache=<fresh CallCache>)`: the `ReplicaPool` behind the ordinary `Model` (cache lookup and write, limiter,
retries, accounting). Every round sends a fresh batch of distinct prompts, so nothing comes from the cache.

Reported per N: requests/s (median over rounds), as a fraction of the ideal N * slots / latency, the speed-up
over N=1, and how evenly the pool spread the calls (min and max share of a replica). With `--kill`, one extra
measurement at N=4 kills one replica (SIGKILL) a second into the batch: every request must still complete,
the ones in flight on the dead replica retried on the others.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from proctor.models import get_model
from proctor.models.cache import CallCache
from proctor.models.recording import CallRecord, call_scope
from proctor.models.replicas import ReplicaPool
from proctor.testing.mock_server import spawn_mock_process

HERE = Path(__file__).resolve().parent


@dataclass
class Row:
    replicas: int
    round: int
    n: int
    wall_s: float
    ok: int
    calls_per_replica: list[int]
    max_busy_per_replica: list[int]
    retried: int = 0
    killed: bool = False

    @property
    def rps(self) -> float:
        return self.n / self.wall_s


class Recorder:
    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def record_call(self, record: CallRecord) -> None:
        self.records.append(record)


def start_mock(latency_ms: float, slots: int) -> tuple[subprocess.Popen[str], str]:
    return spawn_mock_process("--latency-ms", str(latency_ms), "--slots", str(slots))


def mock_call(url: str, path: str, post: bool = False) -> dict[str, Any]:
    req = urllib.request.Request(url.removesuffix("/v1") + path, method="POST" if post else "GET")
    with urllib.request.urlopen(req, timeout=5) as r:
        return dict(json.loads(r.read()))


def messages(tag: str, i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Where is ATP made? (request {tag}-{i})"}]


async def run_batch(
    urls: list[str], procs: list[subprocess.Popen[str]], args: argparse.Namespace, tag: str, workdir: Path,
    kill_after_s: float | None = None,
) -> Row:  # fmt: skip
    for u in urls:
        mock_call(u, "/_mock/reset", post=True)
    model = get_model(
        "openai/mock",
        base_url=urls,
        max_concurrency=args.slots * len(urls),
        cache=CallCache(workdir / f"cache-{tag}.sqlite"),  # fresh: every call goes to a server
        retry_base_delay_s=0.05,
        timeout_s=30,
        replica_cooldown_s=30,
    )
    pool = model.provider
    assert isinstance(pool, ReplicaPool)
    recorder = Recorder()

    async def one(i: int) -> bool:
        with call_scope(item_key=f"{tag}-{i}"):
            c = await model.generate(messages(tag, i))  # type: ignore[arg-type]
        return bool(c.text) and not c.cached

    async def killer() -> None:
        assert kill_after_s is not None
        await asyncio.sleep(kill_after_s)
        os.kill(procs[-1].pid, signal.SIGKILL)

    try:
        t0 = time.perf_counter()
        with call_scope(recorder=recorder, role="candidate"):
            jobs = [asyncio.gather(*(one(i) for i in range(args.n)))]
            if kill_after_s is not None:
                jobs.append(asyncio.ensure_future(killer()))  # type: ignore[arg-type]
            results = (await asyncio.gather(*jobs))[0]
        wall = time.perf_counter() - t0
    finally:
        await model.aclose()
    alive = urls[:-1] if kill_after_s is not None else urls
    busy = [int(mock_call(u, "/_mock/stats")["max_busy"]) for u in alive]
    return Row(
        replicas=len(urls),
        round=0,
        n=args.n,
        wall_s=wall,
        ok=sum(results),
        calls_per_replica=[s.ok for s in pool.stats()],
        max_busy_per_replica=busy,
        retried=sum(1 for r in recorder.records if r.attempts > 1),
        killed=kill_after_s is not None,
    )


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


async def bench(args: argparse.Namespace, workdir: Path) -> list[Row]:
    rows: list[Row] = []
    for n_rep in args.replicas:
        started = [start_mock(args.latency_ms, args.slots) for _ in range(n_rep)]
        procs, urls = [p for p, _ in started], [u for _, u in started]
        try:
            await run_batch(
                urls, procs, argparse.Namespace(**{**vars(args), "n": 4 * n_rep}), "warm", workdir
            )
            for rnd in range(args.rounds):
                row = await run_batch(urls, procs, args, f"n{n_rep}-r{rnd}", workdir)
                row.round = rnd
                rows.append(row)
                print(
                    f"  {n_rep} replica(s) round {rnd}: {row.rps:6.1f} req/s  wall {row.wall_s:6.2f} s  "
                    f"ok {row.ok}/{row.n}  calls per replica {row.calls_per_replica}  "
                    f"max busy {row.max_busy_per_replica}"
                )
        finally:
            stop(procs)
    if args.kill:
        started = [start_mock(args.latency_ms, args.slots) for _ in range(4)]
        procs, urls = [p for p, _ in started], [u for _, u in started]
        try:
            row = await run_batch(urls, procs, args, "kill", workdir, kill_after_s=1.0)
            rows.append(row)
            print(
                f"  4 replicas, one killed at 1 s: {row.rps:6.1f} req/s  ok {row.ok}/{row.n}  "
                f"retried {row.retried}  answered per replica {row.calls_per_replica}"
            )
        finally:
            stop(procs)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--replicas", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8])
    p.add_argument("--n", type=int, default=200, help="requests per batch")
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--slots", type=int, default=2, help="requests a replica works on at once")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-kill", dest="kill", action="store_false", help="skip the kill-one-replica run")
    p.add_argument("--out", type=Path, default=HERE / "results" / "replica_scaling.json")
    args = p.parse_args()

    per_replica = args.slots / (args.latency_ms / 1000.0)
    with tempfile.TemporaryDirectory(prefix="proctor-bench-") as tmp:
        os.environ["PROCTOR_CACHE_DIR"] = tmp  # nothing touches the user's cache
        print(
            f"N={args.n} requests, latency {args.latency_ms:g} ms, {args.slots} slots per replica "
            f"(ideal {per_replica:g} req/s per replica), {args.rounds} rounds"
        )
        rows = asyncio.run(bench(args, Path(tmp)))

    summary = []
    base_rps: float | None = None
    head = [("replicas", 8), ("req/s", 8), ("ideal", 7), ("of ideal", 9)]
    head += [("speed-up", 9), ("share min-max", 14)]
    print("\n" + " ".join(f"{h:>{w}s}" for h, w in head))
    for n_rep in args.replicas:
        rs = [r for r in rows if r.replicas == n_rep and not r.killed]
        rps = statistics.median(r.rps for r in rs)
        base_rps = base_rps or rps
        shares = [c / r.n for r in rs for c in r.calls_per_replica]
        entry = {
            "replicas": n_rep,
            "median_rps": rps,
            "ideal_rps": per_replica * n_rep,
            "fraction_of_ideal": rps / (per_replica * n_rep),
            "speedup_over_1": rps / base_rps,
            "min_share": min(shares),
            "max_share": max(shares),
            "max_busy": max(b for r in rs for b in r.max_busy_per_replica),
        }
        summary.append(entry)
        print(
            f"{n_rep:8d} {rps:8.1f} {entry['ideal_rps']:7.1f} {entry['fraction_of_ideal']:9.1%} "
            f"{entry['speedup_over_1']:8.2f}x {entry['min_share']:6.1%}-{entry['max_share']:.1%}"
        )
    killed = [r for r in rows if r.killed]
    result = {
        "config": {
            "n": args.n,
            "latency_ms": args.latency_ms,
            "slots": args.slots,
            "rounds": args.rounds,
            "replicas": args.replicas,
            "max_concurrency": "slots * replicas",
        },
        "machine": {
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "summary": summary,
        "kill_one_of_4": None if not killed else {**asdict(killed[0]), "rps": killed[0].rps},
        "rounds": [{**asdict(r), "rps": r.rps} for r in rows if not r.killed],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
