"""`proctor view` on a synthetic 100,000-item qa run WITH transcripts: every item has a candidate call and
a judge call with their messages and replies (the judge's instructions shared, so stored once), and one
agent item has 500 calls. Times (first request, then the median of 5) the item list, a filtered list, a
search, sorted lists (first and deep pages), a qa item page and the long agent item page (whose timeline
pages: 50 calls a page), through the app in process; prints the viewer's memory before the first request
and after all of them, and the store's size. Asserts nothing. Run from the repository root:

    PYTHONPATH=src .venv/bin/python bench/viewer_transcripts.py [--items 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient
from viewer_paging import CANDIDATES, WORDS, memory, timed  # this folder is on sys.path when run as a script

from proctor.models.recording import CallRecord
from proctor.store import RunStore
from proctor.viewer import create_app

JUDGE_SYSTEM = (
    "You grade a candidate's answer against the reference. Reply with JSON: "
    '{"reason": "...", "verdict": "correct" | "incorrect"}. ' + "Be strict about names and numbers. " * 20
)
AGENT_KEY = "a_agent_long"
AGENT_CALLS = 500


def build(folder: Path, n: int, seed: int = 0) -> None:
    """The run through the store's own API (`put_item`, `put_judgment`, `record_call` with messages and
    replies), in one transaction."""
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
        question = f"Question {i}: what about the {words}?"
        answer = f"Answer {i} mentions the {rng.choice(WORDS)} " + "and more " * 20
        failed = i % 97 == 0
        data = {
            "question": question,
            "answer": answer,
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
        context = f"Passage about the {words}. " * 8
        store.record_call(
            CallRecord(
                "local", "m", "candidate", key, 400, 30, 0.0, 0.2, False, 1,
                messages=[{"role": "user", "content": f"{context}\n\n{question}"}],
                params={"temperature": 0.0},
                reply=None if failed else answer,
                error="http_500" if failed else None,
            )
        )  # fmt: skip
        if not failed:
            verdict = "correct" if rng.random() < 0.6 else "incorrect"
            store.put_judgment(
                key, "llm_with_reference", verdict=verdict, score=float(verdict == "correct"), reason="r"
            )
            store.record_call(
                CallRecord(
                    "local", "j", "judge", key, 500, 20, 0.0, 0.1, False, 1,
                    messages=[
                        {"role": "system", "content": JUDGE_SYSTEM},
                        {"role": "user", "content": f"{question}\nreference {i}\n{answer}"},
                    ],
                    reply=f'{{"reason": "checked {i}", "verdict": "{verdict}"}}',
                )
            )  # fmt: skip
    store.put_item(
        AGENT_KEY, "answer", {"question": "A long agent task", "answer": "done", "candidate": "agent"}
    )
    history = [{"role": "system", "content": "You are an agent with tools. " * 10}]
    for s in range(AGENT_CALLS):
        history = [*history[-8:], {"role": "user", "content": f"observation {s}: " + "rows " * 40}]
        store.record_call(
            CallRecord(
                "local", "agent", "candidate", AGENT_KEY, 900, 40, 0.0, 0.3, False, 1,
                step="agent", messages=list(history), reply=f"thought {s}: search again",
            )
        )  # fmt: skip
    conn.execute("COMMIT")
    store.finish_run(folder.name)
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--keep", type=Path, default=None, help="build the run here and keep it")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="proctor-viewer-transcripts-"))
    folder = root / "bench-run"
    t0 = time.perf_counter()
    if not (folder / "run.sqlite").exists():
        child = multiprocessing.get_context("spawn").Process(target=build, args=(folder, args.items))
        child.start()
        child.join()
    size = (folder / "run.sqlite").stat().st_size
    print(
        f"store: {args.items:,} items with transcripts, {size / 1e6:.0f} MB,"
        f" built in {time.perf_counter() - t0:.1f} s"
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
        ("item list, first page", base),
        ("item list, last page", f"{base}&page={last}"),
        ("filtered: verdict=incorrect, page 150", f"{base}&verdict=incorrect&page=150"),
        ("filtered: candidate=gamma, first page", f"{base}&candidate=gamma"),
        ("search 'lantern harbour' (1st builds FTS index)", f"{base}&q=lantern+harbour"),
        ("sorted by answer, first page", f"{base}&sort=answer"),
        ("sorted by answer desc, page 1000", f"{base}&sort=answer&order=desc&page=1000"),
        ("sorted by item (question), middle page", f"{base}&sort=item&page={last // 2}"),
        ("sorted by judgments, candidate=beta", f"{base}&sort=judgments&candidate=beta"),
        ("sorted by labels, first page", f"{base}&sort=labels"),
        ("sorted by candidate, last page", f"{base}&sort=candidate&page={last}"),
        (
            "item page (2 calls with text), sorted j/k",
            f"/runs/bench-run/items/{mid_key}?kind=answer&sort=answer",
        ),
        (f"agent item page ({AGENT_CALLS} calls), first 50", f"/runs/bench-run/items/{AGENT_KEY}"),
        ("agent item page, calls page 10", f"/runs/bench-run/items/{AGENT_KEY}?calls=10"),
    ]
    print(f"{'request':48} {'first ms':>9} {'median ms':>10}")
    for name, url in cases:
        first, med = timed(client, url)
        print(f"{name:48} {first:9.1f} {med:10.1f}")
    print(f"memory after all requests: {memory()}")
    print(f"run folder: {folder}")


if __name__ == "__main__":
    main()
