"""Convert the R-Eval authors' HotpotQA slice (300 distractor-setting rows, pandas DataFrames pickled with
joblib) to the JSONL proctor ships as package data (`src/proctor/data/hotpotqa/`).

Unpickling runs code, so it happens once, here, in a throwaway child process under bubblewrap: no network,
the file system read-only, user `nobody`. The child prints plain JSON; the parent validates it and writes
the JSONL. Nothing in the package or the tests unpickles anything.

    git --git-dir=<mirror> show 513756b:hotpotqa_run/data/easy.joblib > /tmp/hp/easy.joblib  # medium, hard
    python bench/hotpotqa_convert.py /tmp/hp src/proctor/data/hotpotqa/r_eval_hotpotqa.jsonl

The conversion changes the format only: the rows, their order (easy, medium, hard as in the files) and
every string are kept as they are.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LEVELS = ("easy", "medium", "hard")


def child(path: str) -> None:
    """Inside the sandbox: unpickle one DataFrame, print its rows as JSON lines of plain data."""
    import types

    import joblib  # only here: the parent never unpickles
    import pandas as pd

    # hard.joblib was written by a pandas that still had Int64Index (removed in pandas 2): read it as Index.
    shim = types.ModuleType("pandas.core.indexes.numeric")
    shim.Int64Index = shim.UInt64Index = shim.Float64Index = shim.NumericIndex = pd.Index  # type: ignore[attr-defined]
    sys.modules.setdefault("pandas.core.indexes.numeric", shim)
    df = joblib.load(path)
    for _, r in df.iterrows():
        context, facts = r["context"], r["supporting_facts"]
        # easy/medium hold the original layout ([title, sentences] pairs); hard the Hugging Face datasets one
        # (a dict of parallel arrays).
        if isinstance(context, dict):
            context = list(zip(context["title"], context["sentences"], strict=True))
        if isinstance(facts, dict):
            facts = list(zip(facts["title"], facts["sent_id"], strict=True))
        row = {
            "id": str(r["id"]),
            "question": str(r["question"]),
            "answer": str(r["answer"]),
            "type": str(r["type"]),
            "level": str(r["level"]),
            "context": [{"title": str(t), "sentences": [str(s) for s in ss]} for t, ss in context],
            "supporting_facts": [[str(t), int(i)] for t, i in facts],
        }
        print(json.dumps(row, ensure_ascii=False))


def unpickle_sandboxed(path: Path) -> list[dict[str, object]]:
    cmd = [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
        "--die-with-parent", "--uid", "65534", "--gid", "65534",
        sys.executable, str(Path(__file__).resolve()), "--child", str(path.resolve()),
    ]  # fmt: skip
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def check(row: dict[str, object], level: str) -> None:
    assert row["level"] == level, row["id"]
    assert row["type"] in ("bridge", "comparison"), row["id"]
    ctx = row["context"]
    assert isinstance(ctx, list) and 2 <= len(ctx) <= 10, row["id"]  # a few rows have fewer than ten
    titles = {p["title"] for p in ctx}
    facts = row["supporting_facts"]
    assert isinstance(facts, list) and facts, row["id"]
    for title, i in facts:
        assert title in titles, (row["id"], title)
        assert isinstance(i, int) and i >= 0, (row["id"], title, i)


def main(src: Path, dest: Path) -> None:
    rows = []
    for level in LEVELS:
        got = unpickle_sandboxed(src / f"{level}.joblib")
        for r in got:
            check(r, level)
        rows += got
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} rows, {dest.stat().st_size} bytes -> {dest}")


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main(Path(sys.argv[1]), Path(sys.argv[2]))
