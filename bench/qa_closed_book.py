"""Does the default judge credit guesses? (issue 17, acceptance 2)

The sample corpus describes an invented island no model can know, so a closed-book candidate's answers
are necessarily guesses (or refusals): every "correct" verdict on them is a judge error. This runs
bench/qa_closed_book.yaml (24 questions, the embedded 1.5B as examiner and judge) with three judge
configurations on one call cache — questions and answers are generated once:

* ``plain``    — the LLM judge with the reference alone, reason first (proctor before issue 17);
* ``rules+guards, reason first`` — deterministic equivalence rules first, guards after a "correct";
* ``default``  — proctor's qa default: rules, guards, a verdict-only judge at P(correct) >= 0.3
  (`GUARDED_THRESHOLD`);
* ``default at threshold 0.5`` — the same judge calls, "correct" from P(correct) >= 0.5 (the judge's own
  verdict, the default before the name guards);
* ``default+sc5`` — the default plus self-consistency (5 samples at temperature 0.7), with ``--sc``.

For each configuration and candidate: the share judged correct with its interval, the methods that
decided, and every closed-book answer judged correct (to read: a judge error or a lucky guess). A BM25
candidate is the control: it has the documents, and its accuracy must not collapse. Writes
bench/results/qa_closed_book.json. From the repository root:

    .venv/bin/python bench/qa_closed_book.py [--sc]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from proctor.config import load_config
from proctor.kit.shared.judges import PanelConfig
from proctor.runner import run_config
from proctor.store.run_store import RunStore

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "qa_closed_book.yaml"
JUDGE = "llm_with_reference"


REASON_FIRST = {"verdict_only": False, "threshold": 0.5}


def variants(with_sc: bool) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {
        "plain": {"equivalence_rules": False, "guards": False, "judge_panel": REASON_FIRST},
        "rules+guards, reason first": {"judge_panel": REASON_FIRST},
        "default": {},
        "default at threshold 0.5": {"judge_panel": {"threshold": 0.5}},
    }
    if with_sc:
        out["default+sc5"] = {"judge_panel": {"samples": 5, "temperature": 0.7}}
    return out


def summarise(run_dir: Path) -> dict[str, Any]:
    summary = json.loads((run_dir / "results.json").read_text())
    store = RunStore(run_dir / "run.sqlite")
    answers = {a["key"]: a["data"] for a in store.items(kind="answer")}
    methods: Counter[str] = Counter()
    credited: list[dict[str, Any]] = []
    for j in store.judgments():
        if j["judge"] != JUDGE or j["item_key"] not in answers:
            continue
        a = answers[j["item_key"]]
        method = (j["data"] or {}).get("method", "?")
        methods[method] += 1
        if j["verdict"] == "correct" and "closed-book" in a["candidate"]:
            credited.append(
                {
                    "candidate": a["candidate"],
                    "question": a["question"],
                    "reference": a["reference_answer"],
                    "answer": a["answer"],
                    "method": method,
                    "p_correct": (j["data"] or {}).get("p_correct"),
                }
            )
    return {
        "run_dir": str(run_dir),
        "accuracy": {name: c.get("accuracy_with_reference") for name, c in summary["candidates"].items()},
        "methods": dict(methods),
        "closed_book_credited": credited,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sc", action="store_true", help="also run self-consistency (5 samples)")
    ap.add_argument("--runs", type=Path, default=HERE / "runs")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "qa_closed_book.json")
    args = ap.parse_args()
    base = load_config(CONFIG)
    report: dict[str, Any] = {"config": str(CONFIG.relative_to(HERE.parent)), "variants": {}}
    for name, change in variants(args.sc).items():
        update = {k: v for k, v in change.items() if k != "judge_panel"}
        if "judge_panel" in change:
            update["judge_panel"] = PanelConfig(**change["judge_panel"])
        settings = base.settings.model_copy(update=update)  # type: ignore[union-attr]
        label = name.replace(" ", "-").replace(",", "").replace("+", "-").replace(".", "")
        cfg = base.model_copy(update={"settings": settings, "name": f"qa-closed-book-{label}"})
        t0 = time.monotonic()
        result = run_config(cfg, out=args.runs, show_progress=True)
        report["variants"][name] = {**summarise(result.run_dir), "seconds": round(time.monotonic() - t0)}
        acc = report["variants"][name]["accuracy"]
        print(name, {c: (a or {}).get("value") for c, a in acc.items()})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
