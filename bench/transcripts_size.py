"""What storing call transcripts costs: bytes of run.sqlite per 1,000 model calls with `store_text: true`
and `store_text: false`, on a scripted qa run (no server, no model: the store's size is all it measures).

The run: N generated documents, one question per document, two candidates (closed-book and BM25 with
k=3, so retrieved passages repeat across calls) and both LLM judges, so ~7 calls per question.

    PYTHONPATH=src .venv/bin/python bench/transcripts_size.py --docs 150
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from proctor.models.scripted import register_script
from proctor.runner import run_config

WORDS = [
    "canal",
    "lantern",
    "harbour",
    "ferry",
    "glass",
    "archive",
    "council",
    "river",
    "bridge",
    "market",
    "tower",
    "mill",
    "quarry",
    "orchard",
    "guild",
    "charter",
    "beacon",
    "tide",
    "salt",
    "copper",
    "loom",
    "kiln",
    "granary",
    "signal",
    "dock",
]


def _examiner(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    tag = next((w for w in text.split() if w.startswith("Fact-")), "Fact-0")
    return json.dumps({"question": f"What does {tag} record?", "answer": f"the {tag} entry"})


def _candidate(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    tag = next((w for w in text.split() if w.startswith("Fact-")), "?").strip("?.,")
    return f"As far as I know, {tag} records the entry about the harbour and its ferries."


def _judge(messages: list[dict[str, Any]], params: Any) -> str:
    return json.dumps(
        {"reason": "The candidate names the same entry as the reference.", "verdict": "correct"}
    )


register_script("bench-tr-examiner", _examiner)
register_script("bench-tr-candidate", _candidate)
register_script("bench-tr-judge", _judge)


def write_corpus(folder: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        body = " ".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))).capitalize() + "."
            for _ in range(14)
        )
        (folder / f"doc{i:04d}.md").write_text(f"# Entry {i}\n\nFact-{i} is recorded here. {body}\n")


def config(base: Path, n: int, store_text: bool) -> Path:
    cfg = base / f"run-{store_text}.yaml"
    cfg.write_text(f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 200, max_chunk_chars: 4000}}
models:
  ex: scripted/bench-tr-examiner
  cand: scripted/bench-tr-candidate
  judge: scripted/bench-tr-judge
roles: {{examiner: ex, judge: judge}}
candidates:
  - {{name: closed, model: cand}}
  - {{name: bm25, model: cand, retriever: bm25, k: 3}}
qa: {{num_questions: {n}, judges: [with_reference, without_reference], equivalence_rules: false}}
store_text: {"true" if store_text else "false"}
""")
    return cfg


def measure(base: Path, n: int, store_text: bool) -> dict[str, Any]:
    import os

    os.environ["PROCTOR_CACHE_DIR"] = str(base / f"cache-{store_text}")  # a cold cache for each
    t0 = time.perf_counter()
    result = run_config(config(base, n, store_text), out=base / f"runs-{store_text}", show_progress=False)
    took = time.perf_counter() - t0
    db = result.run_dir / "run.sqlite"
    con = sqlite3.connect(db)
    calls = con.execute("SELECT COUNT(*) FROM model_calls").fetchone()[0]
    n_texts, z_bytes = con.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(z)), 0) FROM texts").fetchone()
    con.close()
    # What the same text would take uncompressed and without dedup: every message and reply of every call.
    from proctor.kit.record import load_run

    with load_run(result.run_dir) as run:
        raw = sum(
            sum(len(m.content.encode()) for m in c.messages or []) + len((c.reply or "").encode())
            for c in run.transcripts()
        )
    size = db.stat().st_size
    return {
        "store_text": store_text,
        "calls": calls,
        "run_sqlite_bytes": size,
        "bytes_per_1000_calls": round(size / calls * 1000),
        "texts_rows": n_texts,
        "texts_compressed_bytes": z_bytes,
        "message_and_reply_bytes_raw": raw,
        "seconds": round(took, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=150)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        write_corpus(base / "docs", args.docs)
        rows = [measure(base, args.docs, True), measure(base, args.docs, False)]
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
