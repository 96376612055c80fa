"""Throughput of proctor's model-call path against a bare aiohttp client, on the same mock server.

    .venv/bin/python bench/throughput.py            # N=400, latency 200 ms, concurrency 50, 3 rounds

The mock OpenAI-compatible server runs as a separate process. Each round runs both variants (order
alternating) on distinct prompts, so nothing is served from proctor's cache:

- bare:    one aiohttp.ClientSession, asyncio.Semaphore(concurrency), POST + json() per request;
- proctor: get_model("openai/mock", max_concurrency=concurrency, cache=<fresh CallCache>) with every call
           recorded into a fresh SQLite RunStore through call_scope (role + per-item key).

Reported: requests/s (median over rounds) as a fraction of the ideal concurrency / latency, proctor's
throughput relative to bare (target >= 0.95), and client CPU time per call (time.process_time / calls).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from proctor.models import get_model
from proctor.models.cache import CallCache
from proctor.models.recording import call_scope
from proctor.testing.mock_server import spawn_mock_process

try:
    from proctor.store import RunStore
except ImportError:  # pragma: no cover - the store is built in parallel
    RunStore = None  # type: ignore[assignment,misc]

HERE = Path(__file__).resolve().parent
PROMPT = (
    "You are a careful examiner. Using only the reference passage below, answer the question in one "
    "short sentence.\n\nReference: The mitochondrion is the site of oxidative phosphorylation; its inner "
    "membrane holds the electron transport chain, and ATP synthase uses the proton gradient to make ATP. "
) * 3


@dataclass
class Measurement:
    variant: str
    round: int
    n: int
    wall_s: float
    cpu_s: float
    mock_cpu_s: float
    ok: int

    @property
    def rps(self) -> float:
        return self.n / self.wall_s

    @property
    def cpu_ms_per_call(self) -> float:
        return 1000.0 * self.cpu_s / self.n


class Timer:
    """Wall and process CPU time of the block it wraps."""

    wall_s = 0.0
    cpu_s = 0.0

    def __enter__(self) -> Timer:
        self._c0, self._t0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._t0
        self.cpu_s = time.process_time() - self._c0


class ListRecorder:
    """Fallback recorder when proctor.store is not available."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def record_call(self, record: Any) -> None:
        self.records.append(record)


def messages(tag: str, i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": f"{PROMPT}\n\nQuestion {tag}-{i}: where is ATP made?"},
    ]


def start_mock(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    return spawn_mock_process("--latency-ms", str(latency_ms))


async def run_bare(base_url: str, n: int, concurrency: int, tag: str, timer: Timer | None = None) -> int:
    """The reference: one session, a semaphore, POST + json() per request."""
    sem = asyncio.Semaphore(concurrency)
    url = f"{base_url}/chat/completions"
    ok = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(i: int) -> None:
            nonlocal ok
            body = {
                "model": "mock",
                "messages": messages(tag, i),
                "temperature": 0.0,
                "max_tokens": 512,
                "seed": 0,
            }
            async with sem, session.post(url, json=body) as resp:
                data = await resp.json()
            if resp.status == 200 and data["choices"][0]["message"]["content"]:
                ok += 1

        with timer or Timer():
            await asyncio.gather(*(one(i) for i in range(n)))
    return ok


async def run_proctor(
    base_url: str, n: int, concurrency: int, tag: str, workdir: Path, timer: Timer | None = None
) -> tuple[int, str]:
    """proctor's path: cache lookup + limiter + retries + cache write + call record in the run store.

    Creating the fresh SQLite files (cache, run store) is run setup and is not timed; every call is."""
    cache = CallCache(workdir / f"cache-{tag}.sqlite")
    if RunStore is not None:
        recorder: Any = RunStore(workdir / f"run-{tag}.sqlite")
        recorder_name = "RunStore (SQLite)"
    else:
        recorder = ListRecorder()
        recorder_name = "in-memory list"
    model = get_model("openai/mock", base_url=base_url, max_concurrency=concurrency, cache=cache)

    async def one(i: int) -> bool:
        with call_scope(item_key=f"{tag}-{i}"):
            c = await model.generate(messages(tag, i))  # type: ignore[arg-type]
        return bool(c.text) and not c.cached

    try:
        with timer or Timer(), call_scope(recorder=recorder, role="candidate"):
            results = await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await model.aclose()
    if RunStore is not None:
        (calls,) = recorder._conn().execute("SELECT COUNT(*) FROM model_calls WHERE cached=0").fetchone()
        recorder.close()
    else:
        calls = len(recorder.records)
    assert calls == n, f"recorder saw {calls} calls, expected {n}"
    return sum(results), recorder_name


async def measure(
    variant: str, rnd: int, args: argparse.Namespace, base_url: str, mock: psutil.Process, workdir: Path
) -> Measurement:
    tag = f"{variant}-r{rnd}"
    timer = Timer()
    m0 = mock.cpu_times()
    if variant == "bare":
        ok = await run_bare(base_url, args.n, args.concurrency, tag, timer)
    else:
        ok, _ = await run_proctor(base_url, args.n, args.concurrency, tag, workdir, timer)
    m1 = mock.cpu_times()
    mock_cpu = (m1.user + m1.system) - (m0.user + m0.system)
    return Measurement(variant, rnd, args.n, timer.wall_s, timer.cpu_s, mock_cpu, ok)


async def bench(
    args: argparse.Namespace, base_url: str, mock: psutil.Process, workdir: Path
) -> list[Measurement]:
    # Warm-up (imports, first connections, SQLite files) — not measured.
    await run_bare(base_url, 50, args.concurrency, "warm")
    _, recorder_name = await run_proctor(base_url, 50, args.concurrency, "warm", workdir)
    print(f"proctor recorder: {recorder_name}")
    out: list[Measurement] = []
    for rnd in range(args.rounds):
        order = ("bare", "proctor") if rnd % 2 == 0 else ("proctor", "bare")
        for variant in order:
            m = await measure(variant, rnd, args, base_url, mock, workdir)
            print(
                f"  round {rnd} {variant:8s} {m.rps:7.1f} req/s  wall {m.wall_s:6.3f} s  "
                f"cpu {m.cpu_ms_per_call:6.3f} ms/call  mock cpu {m.mock_cpu_s:5.2f} s  ok {m.ok}/{m.n}"
            )
            out.append(m)
    return out


def profile_proctor(args: argparse.Namespace, base_url: str, workdir: Path) -> str:
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(run_proctor(base_url, args.n, args.concurrency, "profile", workdir))
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
    return s.getvalue()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=400)
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--target", type=float, default=0.95)
    p.add_argument("--out", type=Path, default=HERE / "results" / "throughput.json")
    p.add_argument("--profile", action="store_true", help="also cProfile one proctor round (not in figures)")
    args = p.parse_args()

    ideal = args.concurrency / (args.latency_ms / 1000.0)
    proc, base_url = start_mock(args.latency_ms)
    mock = psutil.Process(proc.pid)
    try:
        with tempfile.TemporaryDirectory(prefix="proctor-bench-") as tmp:
            os.environ["PROCTOR_CACHE_DIR"] = tmp  # nothing touches the user's cache
            print(
                f"mock server {base_url} (pid {proc.pid}), N={args.n}, latency {args.latency_ms:g} ms, "
                f"concurrency {args.concurrency}, ideal {ideal:.1f} req/s"
            )
            runs = asyncio.run(bench(args, base_url, mock, Path(tmp)))
            profile = profile_proctor(args, base_url, Path(tmp)) if args.profile else None
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()

    summary: dict[str, dict[str, float]] = {}
    for variant in ("bare", "proctor"):
        ms = [m for m in runs if m.variant == variant]
        rps = statistics.median(m.rps for m in ms)
        summary[variant] = {
            "median_rps": rps,
            "fraction_of_ideal": rps / ideal,
            "median_cpu_ms_per_call": statistics.median(m.cpu_ms_per_call for m in ms),
            "median_mock_cpu_s": statistics.median(m.mock_cpu_s for m in ms),
        }
    ratio = summary["proctor"]["median_rps"] / summary["bare"]["median_rps"]
    paired = [
        p.rps / b.rps
        for b, p in zip(
            [m for m in runs if m.variant == "bare"], [m for m in runs if m.variant == "proctor"], strict=True
        )
    ]

    print()
    print(f"{'variant':10s} {'req/s':>8s} {'of ideal':>9s} {'CPU ms/call':>12s}")
    for variant, s in summary.items():
        print(
            f"{variant:10s} {s['median_rps']:8.1f} {s['fraction_of_ideal']:9.1%} "
            f"{s['median_cpu_ms_per_call']:12.3f}"
        )
    verdict = "PASS" if ratio >= args.target else "FAIL"
    print(
        f"proctor / bare = {ratio:.3f} (per round: {', '.join(f'{r:.3f}' for r in paired)}; "
        f"target >= {args.target}) {verdict}"
    )

    result = {
        "config": {
            "n": args.n,
            "concurrency": args.concurrency,
            "latency_ms": args.latency_ms,
            "rounds": args.rounds,
            "ideal_rps": ideal,
            "target_ratio": args.target,
        },
        "machine": {
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "aiohttp": aiohttp.__version__,
        },
        "proctor_recorder": "RunStore (SQLite)" if RunStore is not None else "in-memory list",
        "rounds": [{**asdict(m), "rps": m.rps, "cpu_ms_per_call": m.cpu_ms_per_call} for m in runs],
        "summary": summary,
        "proctor_over_bare": ratio,
        "proctor_over_bare_per_round": paired,
        "pass": ratio >= args.target,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    if profile:
        print(profile)


if __name__ == "__main__":
    main()
