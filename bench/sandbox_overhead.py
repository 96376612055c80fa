"""What isolation costs per PAL program: wall time of a trivial program (one tool call, then `answer`)
under each sandbox tier this machine has, against a bare `python -I -c` subprocess.

    .venv/bin/python bench/sandbox_overhead.py [N]

Prints one line per tier: median and 90th-percentile wall seconds over N runs (default 20), and the ratio
to the bare subprocess measured in the same run.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time

from proctor.agents.sandbox import probe_tier, run_program
from proctor.agents.tools import Toolbox, tool


def lookup(entity: str) -> str:
    """Look an entity up."""
    return f"{entity}: founded 1862"


def bare(n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "answer = 1"], check=True)
        out.append(time.perf_counter() - t)
    return out


async def tier(name: str, n: int) -> list[float]:
    box = Toolbox([tool(lookup)])
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = await run_program(
            "answer = lookup('Ambry').split()[-1]", toolbox=box, tier=name, allow_unsafe=True
        )  # type: ignore[arg-type]
        assert r.answer == "1862", r
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    probe = probe_tier()
    print(f"strongest tier: {probe.tier}; unavailable: {probe.unavailable or 'none'}")
    base = statistics.median(bare(n))
    print(f"bare subprocess: median {base:.3f} s")
    tiers = ["bubblewrap", "unshare", "none"]
    for name in tiers[tiers.index(probe.tier) :]:
        times = sorted(asyncio.run(tier(name, n)))
        med, p90 = statistics.median(times), times[int(0.9 * (len(times) - 1))]
        print(f"{name:10s}: median {med:.3f} s, p90 {p90:.3f} s, ratio to bare {med / base:.2f}")


if __name__ == "__main__":
    main()
