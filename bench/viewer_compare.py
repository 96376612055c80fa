"""`proctor view` compare page on two synthetic runs of 100,000 items each (built with the store's API as in
`viewer_paging.py`, with verdicts drawn from different seeds, so about half the pairs flip):
time of the first compare (builds both runs' side indexes), of a compare in a new viewer (the SQL join of
the two runs' outcome tables, indexes already on disk), of the next requests (the comparison reused while
both stores are unchanged), and the process's memory (resident and peak) after each; then the runs list,
first visit and again (summaries cached by store stamp). The stores are built in child processes, so this
process's peak is the viewer's alone. Prints the figures; asserts nothing. Run from the repository root:

    .venv/bin/python bench/viewer_compare.py [--items 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient
from viewer_paging import build, memory  # this folder is on sys.path when run as a script

from proctor.viewer import create_app


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--keep", type=Path, default=None, help="build the runs here and keep them")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="proctor-compare-bench-"))
    t0 = time.perf_counter()
    for seed, name in ((0, "run-a"), (1, "run-b")):
        if not (root / name / "run.sqlite").exists():
            child = multiprocessing.get_context("spawn").Process(
                target=build, args=(root / name, args.items, seed)
            )
            child.start()
            child.join()
    print(f"stores: 2 x {args.items:,} items, built in {time.perf_counter() - t0:.1f} s")
    client = TestClient(create_app(root), base_url="http://127.0.0.1")
    url = "/compare?a=run-a&b=run-b"
    print(f"memory before the first request: {memory()}")
    t0 = time.perf_counter()
    r = client.get(url)
    assert r.status_code == 200, r.text[:500]
    print(f"first compare (builds both side indexes): {(time.perf_counter() - t0) * 1000:.0f} ms; {memory()}")
    joins = []
    for _ in range(3):  # a new viewer each time: nothing cached in memory, the side indexes on disk
        c = TestClient(create_app(root), base_url="http://127.0.0.1")
        t0 = time.perf_counter()
        assert c.get(url).status_code == 200
        joins.append((time.perf_counter() - t0) * 1000)
    print(
        f"compare in a new viewer (indexes built, join in SQL) x3: median {statistics.median(joins):.0f} ms, "
        f"max {max(joins):.0f} ms; {memory()}"
    )
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        r = client.get(url)
        times.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200
    print(
        f"compare again x{args.repeat} (same stores: the comparison reused): median "
        f"{statistics.median(times):.0f} ms, min {min(times):.0f} ms, max {max(times):.0f} ms; {memory()}"
    )
    fresh = TestClient(create_app(root), base_url="http://127.0.0.1")  # a new viewer: no summary cached
    t0 = time.perf_counter()
    fresh.get("/")
    first = (time.perf_counter() - t0) * 1000
    again = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        fresh.get("/")
        again.append((time.perf_counter() - t0) * 1000)
    print(f"runs list: first visit {first:.0f} ms, again median {statistics.median(again):.1f} ms")
    print(f"runs folder: {root}")


if __name__ == "__main__":
    main()
