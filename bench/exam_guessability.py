"""Do exam items need the corpus? Controlled candidates on a fictional corpus, before and after the
guessability filter (issue 18).

1. `bench/exam_guessability.yaml` writes an exam from the sample corpus (ten documents about an invented
   island) with the embedded 1.5B examiner and measures every item's closed-book guessability (the
   examiner's probability of the correct option with no context); no filter is applied in the run.
2. Controlled candidates answer every item through proctor's one model-call path (`select_option`, the
   exam's own answer prompt), the documents given as passages in the prompt:
   * ``closed-book``  — the 1.5B, no documents (the examiner's own closed-book pick);
   * ``half``         — the 1.5B with documents 1-5 (sorted file names) in its context;
   * ``full``         — the 1.5B with all ten documents;
   * ``closed-0.5b``  — the 0.5B, no documents: a closed-book reader the filter never consulted, so
     its accuracy on the kept items is not lowered by construction.
3. For each threshold (none, 0.9, 0.75, 0.6, 0.5) the items kept (guessability below it) and each
   candidate's accuracy with a Wilson interval on all kept items, on items from documents 1-5 and on items
   from documents 6-10. The half candidate never saw documents 6-10: on their items it should do as well
   as closed-book, and closed-book should be near chance (1 / options).

Writes bench/results/exam_guessability.json and prints the tables. From the repository root:

    .venv/bin/python bench/exam_guessability.py            # ~40 min on 2 cores with an empty cache
    .venv/bin/python bench/exam_guessability.py --threads 1

Everything goes through the call cache, so a second run takes seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.candidates.multiple_choice import select_option
from proctor.config import load_config
from proctor.estimates import Estimate
from proctor.models import get_model
from proctor.models.base import Model
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.grading import answer_messages
from proctor.runner import run_config

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "exam_guessability.yaml"
CORPUS = HERE.parent / "src" / "proctor" / "data" / "sample_corpus"
# Guessability rules compared: none, the probability rule at several thresholds, two readers agreeing.
# "examiner p>=0.35": the examiner's own probability on the key (not the readers' mean), the rule chosen on
# the development corpus exam_dev_corpus2 before the third blind corpus was measured (bench/README).
RULES: list[str] = [
    "none",
    "p>=0.9",
    "p>=0.75",
    "p>=0.6",
    "p>=0.5",
    "readers_agree",
    "examiner p>=0.35",
    "examiner p>=0.4",
]


@dataclass(frozen=True)
class Passage:
    """A whole document given to a candidate (the exam prompt reads `.text`)."""

    text: str


@dataclass(frozen=True)
class Candidate:
    name: str
    model: str
    documents: tuple[str, ...]  # file names in its context


def documents(corpus: Path) -> list[str]:
    return sorted(p.name for p in corpus.iterdir() if p.is_file())


def candidates(corpus: Path) -> list[Candidate]:
    docs = documents(corpus)
    return [
        Candidate("closed-book", "local/qwen2.5-coder-1.5b", ()),
        Candidate("half", "local/qwen2.5-coder-1.5b", tuple(docs[:5])),
        Candidate("full", "local/qwen2.5-coder-1.5b", tuple(docs)),
        Candidate("closed-0.5b", "local/qwen2.5-coder-0.5b", ()),
    ]


async def answer_all(
    models: dict[str, Model], cand: Candidate, exam: list[dict[str, Any]], corpus: Path
) -> dict[str, bool | None]:
    """item id -> whether the candidate picked the correct option (None: the call failed, recorded)."""
    passages = [Passage(f"[{n}]\n{(corpus / n).read_text(encoding='utf-8')}") for n in cand.documents]
    out: dict[str, bool | None] = {}
    for q in exam:
        try:
            item = ExamQuestion.model_validate(q)
            sel = await select_option(models[cand.model], answer_messages(item, [], passages), item.choices)
            out[q["id"]] = sel.letter == q["answer"]
        except Exception as e:  # recorded per item with its cause, never scored
            print(f"  {cand.name} {q['id']}: {type(e).__name__}: {e}")
            out[q["id"]] = None
    return out


def accuracy(results: dict[str, bool | None], ids: list[str]) -> dict[str, Any]:
    answered = [results[i] for i in ids if results.get(i) is not None]
    return Estimate.proportion(sum(1 for r in answered if r), len(answered)).model_dump()


def flagged(
    q: dict[str, Any],
    rule: str,
    readers: dict[str, dict[str, bool]],
    examiner_p: dict[str, float] | None = None,
) -> bool:
    """Whether `rule` calls item `q` guessable (`readers`: item id -> reader -> picked the key;
    `examiner_p`: item id -> the examiner's closed-book probability on the key)."""
    if rule == "none":
        return False
    if rule.startswith("examiner p>="):
        p = (examiner_p or {}).get(q["id"])
        return p is not None and p >= float(rule.split(">=")[1])
    if rule == "readers_agree":
        picks = readers.get(q["id"], {})
        if len(picks) >= 2:
            return all(picks.values())
        rule = "p>=0.75"
    g = q.get("guessability")
    return g is not None and g >= float(rule[3:])


def table(
    exam: list[dict[str, Any]],
    answers: dict[str, dict[str, bool | None]],
    seen: set[str],
    readers: dict[str, dict[str, bool]],
    examiner_p: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    rows = []
    for rule in RULES:
        kept = [q for q in exam if not flagged(q, rule, readers, examiner_p)]
        first = [q["id"] for q in kept if q["source"] in seen]
        second = [q["id"] for q in kept if q["source"] not in seen]
        rows.append(
            {
                "rule": rule,
                "kept": len(kept),
                "from_docs_1_5": len(first),
                "from_docs_6_10": len(second),
                "chance": round(sum(1 / len(q["choices"]) for q in kept) / max(len(kept), 1), 4),
                "candidates": {
                    name: {
                        "all": accuracy(res, [q["id"] for q in kept]),
                        "docs_1_5": accuracy(res, first),
                        "docs_6_10": accuracy(res, second),
                    }
                    for name, res in answers.items()
                },
            }
        )
    return rows


def reader_picks(run_dir: Path) -> dict[str, dict[str, bool]]:
    """item id -> closed-book reader -> whether it picked the key, from the run's guessability stats."""
    from proctor import load_run

    stats = load_run(run_dir).result.exam.guessability  # type: ignore[attr-defined]
    per_item = getattr(stats, "per_item", None) or {}
    return {qid: dict(g.picked_key) for qid, g in per_item.items()}


def examiner_probabilities(run_dir: Path) -> dict[str, float]:
    """item id -> the examiner's closed-book probability on the key (the reader not among
    `guessability_models`), from the run's guessability stats."""
    from proctor import load_run

    run = load_run(run_dir)
    stats = run.result.exam.guessability  # type: ignore[union-attr]
    others = set(run.config.settings.guessability_models)  # type: ignore[union-attr]
    out: dict[str, float] = {}
    for qid, g in (getattr(stats, "per_item", None) or {}).items():
        mine = {m: p for m, p in g.per_model.items() if m not in others and p is not None}
        if len(mine) == 1:
            out[qid] = next(iter(mine.values()))
    return out


def fmt(e: dict[str, Any]) -> str:
    if e["value"] is None:
        return "—"
    return f"{e['value']:.2f} [{e['lo']:.2f}, {e['hi']:.2f}] (n={e['n']})"


def yield_only(run_dir: Path, wanted: int, kept: int, seconds: int, out: Path) -> None:
    """The exam's yield alone: asked, kept, drops by filter, repairs by failure, generation rounds."""
    stats = json.loads((run_dir / "results.json").read_text())["exam"]
    asked = stats.get("planned") or 0
    report = {
        "run_dir": str(run_dir),
        "exam_seconds": seconds,
        "asked": asked,
        "kept": kept,
        "num_questions": wanted,
        "yield_of_num_questions": round(kept / wanted, 4),
        "filtered": stats.get("filtered"),
        "repairs": stats.get("repairs"),
        "rounds": stats.get("rounds"),
        "target_missed": stats.get("target_missed"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    print(f"\nwritten {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=HERE / "results" / "exam_guessability.json")
    ap.add_argument("--runs", type=Path, default=HERE / "runs")
    ap.add_argument("--config", type=Path, default=CONFIG, help="the exam run (its corpus is the corpus)")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="the documents the candidates are given")
    ap.add_argument(
        "--threads", type=int, default=1, help="llama.cpp threads of the candidates (0: all cores)"
    )
    ap.add_argument(
        "--n-ctx", type=int, default=12288, help="context of the candidates (all ten documents must fit)"
    )
    ap.add_argument(
        "--exam-only",
        action="store_true",
        help="write the exam and report its yield (asked, kept, drops, repairs); no candidates",
    )
    args = ap.parse_args()

    t0 = time.monotonic()
    result = run_config(args.config, out=args.runs, show_progress=True)
    exam = [json.loads(line) for line in (result.run_dir / "exam.jsonl").read_text().splitlines() if line]
    t_exam = time.monotonic() - t0
    if args.exam_only:
        wanted = load_config(args.config).settings.num_questions  # type: ignore[attr-defined]
        yield_only(result.run_dir, wanted, len(exam), round(t_exam), args.out)
        return
    opts: dict[str, Any] = {"timeout_s": 1200, "n_ctx": args.n_ctx}
    if args.threads:
        opts["threads"] = args.threads
    cands = candidates(args.corpus)
    models = {m: get_model(m, **opts) for m in {c.model for c in cands}}
    seen = set(documents(args.corpus)[:5])
    answers: dict[str, dict[str, bool | None]] = {}
    for cand in cands:
        t = time.monotonic()
        answers[cand.name] = asyncio.run(answer_all(models, cand, exam, args.corpus))
        print(f"{cand.name}: {len(exam)} items in {time.monotonic() - t:.0f} s")
    readers = reader_picks(result.run_dir)
    rows = table(exam, answers, seen, readers, examiner_probabilities(result.run_dir))
    stats = json.loads((result.run_dir / "results.json").read_text())["exam"]
    g = [q["guessability"] for q in exam if q.get("guessability") is not None]
    report = {
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "run_dir": str(result.run_dir),
        "exam_items": len(exam),
        "asked": stats.get("planned"),
        "repairs": stats.get("repairs"),
        "filtered": stats.get("filtered"),
        "exam_seconds": round(t_exam),
        "documents_seen_by_half": sorted(seen),
        "guessability_histogram": {
            f"{b / 10:.1f}": sum(1 for v in g if min(int(v * 10), 9) == b) for b in range(10)
        },
        "rows": rows,
        "items": [
            {
                "id": q["id"],
                "source": q["source"],
                "guessability": q.get("guessability"),
                "readers": readers.get(q["id"], {}),
                **{name: res.get(q["id"]) for name, res in answers.items()},
            }
            for q in exam
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    names = [c.name for c in cands]
    print(
        f"asked {stats.get('planned')}, kept {len(exam)}; repairs {stats.get('repairs')}; "
        f"filtered {stats.get('filtered')}"
    )
    for part in ("all", "docs_1_5", "docs_6_10"):
        print(f"\n### accuracy on {part.replace('_', ' ')}\n")
        print("| guessable rule | kept | chance | " + " | ".join(names) + " |")
        print("|---|---|---|" + "---|" * len(names))
        for r in rows:
            cells = " | ".join(fmt(r["candidates"][n][part]) for n in names)
            print(f"| {r['rule']} | {r['kept']} | {r['chance']:.2f} | {cells} |")
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
