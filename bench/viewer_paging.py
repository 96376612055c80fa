"""`proctor view` item browser on a synthetic run of 100,000 items: time of the first, middle and last
page, of filtered pages (candidate, verdict, error cause; first and deep pages), of full-text search pages
(the first search builds the full-text index), of an item page, each through the app (Starlette's
TestClient, in process), then a walk over 200 consecutive pages; and the process's memory (resident and
peak) before the first request, after the first visit built the side index, and after every request.
The store is built in a child process, so this process's peak is the viewer's alone. Prints the figures;
asserts nothing. Run from the repository root:

    .venv/bin/python bench/viewer_paging.py [--items 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient

from proctor.models.recording import CallRecord
from proctor.store import RunStore
from proctor.viewer import create_app

CANDIDATES = ["alpha", "beta", "gamma", "delta"]
WORDS = ["harbour", "lantern", "canal", "tide", "warden", "ledger", "beacon", "granary", "archive", "vessel"]


def build(folder: Path, n: int, seed: int = 0) -> None:
    """A synthetic qa run of `n` items written through the store's own API (`RunStore.put_item`,
    `put_judgment`, `record_call`), in one transaction so it takes a minute, not an hour."""
    folder.mkdir(parents=True, exist_ok=True)
    store = RunStore(folder / "run.sqlite")
    store.start_run(folder.name, "qa", {"candidates": [{"name": c} for c in CANDIDATES]}, "0" * 64, "bench")
    rng = random.Random(seed)
    conn = store._conn()
    conn.execute("BEGIN")
    for i in range(n):
        key = f"a_{i:020d}"
        cand = CANDIDATES[i % len(CANDIDATES)]
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        failed = i % 97 == 0
        data = {
            "question": f"Question {i}: what about the {words}?",
            "answer": f"Answer {i} mentions the {rng.choice(WORDS)} " + "and more " * 20,
            "reference_answer": f"reference {i}",
            "candidate": cand,
            "question_id": f"q_{i // len(CANDIDATES):08d}",
        }
        store.put_item(
            key,
            "answer",
            data,
            status="error" if failed else "done",
            error="boom" if failed else None,
            error_cause="http_500" if failed else None,
        )
        if not failed:
            verdict = "correct" if rng.random() < 0.6 else "incorrect"
            store.put_judgment(
                key, "llm_with_reference", verdict=verdict, score=float(verdict == "correct"), reason="r"
            )
        store.record_call(CallRecord("local", "m", "candidate", key, 400, 30, 0.0, 0.2, False, 1))
        store.record_call(CallRecord("local", "j", "judge", key, 500, 20, 0.0, 0.1, False, 1))
    conn.execute("COMMIT")
    store.finish_run(folder.name)
    store.close()


def memory() -> str:
    """Resident and peak resident memory of this process (Linux /proc)."""
    status = Path("/proc/self/status").read_text()
    kb = {
        k: int(v.split()[0])
        for k, v in (ln.split(":", 1) for ln in status.splitlines())
        if k in ("VmRSS", "VmHWM")
    }
    return f"RSS {kb['VmRSS'] / 1024:.0f} MB, peak {kb['VmHWM'] / 1024:.0f} MB"


def timed(client: TestClient, url: str, repeat: int = 5) -> tuple[float, float]:
    """(first request ms, median of the next `repeat` ms)."""
    t0 = time.perf_counter()
    r = client.get(url)
    first = (time.perf_counter() - t0) * 1000
    assert r.status_code == 200, (url, r.status_code, r.text[:500])
    again = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        client.get(url)
        again.append((time.perf_counter() - t0) * 1000)
    return first, statistics.median(again)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--keep", type=Path, default=None, help="build the run here and keep it")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="proctor-viewer-bench-"))
    folder = root / "bench-run"
    t0 = time.perf_counter()
    if not (folder / "run.sqlite").exists():
        child = multiprocessing.get_context("spawn").Process(target=build, args=(folder, args.items))
        child.start()
        child.join()
    print(
        f"store: {args.items:,} items, {(folder / 'run.sqlite').stat().st_size / 1e6:.0f} MB, "
        f"built in {time.perf_counter() - t0:.1f} s"
    )
    client = TestClient(create_app(root), base_url="http://127.0.0.1")
    base = "/runs/bench-run/items?kind=answer"
    last = -(-args.items // 50)
    mid_key = f"a_{args.items // 2:020d}"
    print(f"memory before the first request: {memory()}")
    t0 = time.perf_counter()
    client.get(base)
    print(f"first visit (builds the side index viewer.sqlite): {(time.perf_counter() - t0) * 1000:.0f} ms")
    print(f"memory after it: {memory()}")
    cases = [
        ("first page", base),
        ("middle page", f"{base}&page={last // 2}"),
        ("last page", f"{base}&page={last}"),
        ("candidate=gamma, first page", f"{base}&candidate=gamma"),
        ("candidate=gamma, last page", f"{base}&candidate=gamma&page={args.items // 4 // 50}"),
        ("verdict=incorrect, first page", f"{base}&verdict=incorrect"),
        ("verdict=incorrect, page 150", f"{base}&verdict=incorrect&page=150"),
        ("cause=http_500", f"{base}&cause=http_500"),
        ("search 'lantern harbour' (1st builds FTS index)", f"{base}&q=lantern+harbour"),
        ("search 'lantern harbour', page 150", f"{base}&q=lantern+harbour&page=150"),
        ("search 'Question 77777'", f"{base}&q=Question+77777"),
        ("search 'beacon' + candidate=beta", f"{base}&q=beacon&candidate=beta"),
        ("item page (2 calls, 1 judgment)", f"/runs/bench-run/items/{mid_key}?kind=answer"),
        ("run page", "/runs/bench-run"),
    ]
    print(f"{'request':48} {'first ms':>9} {'median ms':>10}")
    for name, url in cases:
        first, med = timed(client, url)
        print(f"{name:48} {first:9.1f} {med:10.1f}")
    walk = []
    for p in range(1, 201):
        t0 = time.perf_counter()
        client.get(f"{base}&page={p}")
        walk.append((time.perf_counter() - t0) * 1000)
    print(
        f"walk over pages 1-200: median {statistics.median(walk):.1f} ms, max {max(walk):.1f} ms"
        f"; memory after: {memory()}"
    )
    print(f"run folder: {folder}")


if __name__ == "__main__":
    main()
