"""How often is each equivalence rule and guard right when it fires? Rules only, no model (issue 32).

For every label set in `bench/data/judge_labels*.jsonl` and every rule and guard of
`proctor.judging.equivalence` (the English registry), as the default judging path runs them with the
question known:

* a rule fires when `decide` credits the item with it (the first sure rule, the method a judgment
  records); it is right when the human label is "correct";
* a guard fires when `veto` would overrule an LLM "correct" with it (the first sure guard), on the items no
  rule decided (those never reach the LLM); it is right when the human label is "incorrect". No LLM
  verdict is needed: this counts every item the guard would overrule, whatever the LLM said, so it is the
  stricter measure. `nothing_beyond_question` (called by RECKON, not by `veto`) is counted alone.

A guard matters only where the LLM said "correct": the second table counts the guards behind the LLM
verdicts recorded by `bench/judge_agreement.py` for the default judge
(`bench/results/judge_agreement_current_*.json`, no model call here): a guard fires when the recorded
verdict was an LLM "correct" (or a guard's overruling of one) and `veto` is sure now.

Precision = right / fired, with its Wilson 95 % interval. Writes bench/results/rule_precision.json and
prints the markdown table of bench/README.md. From the repository root:

    .venv/bin/python bench/rule_precision.py
    .venv/bin/python bench/rule_precision.py --exclude biomedical   # leave a held-out set unseen

`--exclude NAME` (repeatable) leaves out the set named NAME (`judge_labels_NAME.jsonl`; "biomedical" is
that set alone, not `biomedical2_dev`): its items are never read, so a set kept for a later measurement
stays unseen.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from proctor.judging.equivalence import EXTRA_GUARDS, GUARDS, RULES, decide, veto
from proctor.judging.stats import wilson_interval

HERE = Path(__file__).resolve().parent
MIN_PRECISION = 0.95
MIN_FIRED = 5  # below this, a precision says little


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def count(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per rule/guard name: fired, right and the ids it was wrong on."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"fired": 0, "right": 0, "wrong": []})

    def tally(name: str, right: bool, item_id: str) -> None:
        out[name]["fired"] += 1
        out[name]["right"] += int(right)
        if not right:
            out[name]["wrong"].append(item_id)

    for it in items:
        a, r, q, correct = it["answer"], it["reference"], it["question"], it["label"] == "correct"
        rule = decide(a, r, q)
        if rule is not None:
            tally(rule.method, correct, it["id"])
            continue
        guard = veto(a, r, q)
        if guard is not None:
            tally(guard.method, not correct, it["id"])
        for extra in EXTRA_GUARDS["en"]:
            if extra.check(a, r, q) is not None:
                tally(extra.name, not correct, it["id"])
    return out


def count_behind_llm(items: list[dict[str, Any]], recorded: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per guard: fired, right, wrong ids — on the items whose recorded default verdict was an LLM
    "correct" (method `llm…` with verdict correct, or a guard that overruled one)."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"fired": 0, "right": 0, "wrong": []})
    guard_names = {g.name for g in GUARDS["en"]}
    for it in items:
        rec = recorded.get(it["id"])
        if rec is None:
            continue
        llm_correct = rec["method"] in guard_names or (
            rec["method"].startswith("llm") and rec["verdict"] == "correct"
        )
        if not llm_correct or decide(it["answer"], it["reference"], it["question"]) is not None:
            continue
        guard = veto(it["answer"], it["reference"], it["question"])
        if guard is not None:
            right = it["label"] == "incorrect"
            out[guard.method]["fired"] += 1
            out[guard.method]["right"] += int(right)
            if not right:
                out[guard.method]["wrong"].append(it["id"])
    return out


def recorded_default(set_stem: str) -> dict[str, dict[str, Any]] | None:
    """The default judge's recorded per-item verdicts for a label set (bench/judge_agreement.py), if any."""
    name = "dev" if set_stem == "judge_labels" else set_stem.replace("judge_labels_", "")
    path = HERE / "results" / f"judge_agreement_current_{name}.json"
    if not path.exists():
        return None
    results = json.loads(path.read_text())["results"]
    default = [r for r in results if r["config"]["name"].startswith("1.5b default")]
    return default[-1]["items"] if default else None


def table_rows(
    per_set: dict[str, dict[str, dict[str, Any]]], names: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    rows = []
    for kind, name in names:
        fired = sum(s[name]["fired"] for s in per_set.values() if name in s)
        right = sum(s[name]["right"] for s in per_set.values() if name in s)
        wrong = [f"{k}:{i}" for k, s in per_set.items() if name in s for i in s[name]["wrong"]]
        lo, hi = wilson_interval(right, fired) if fired else (0.0, 0.0)
        rows.append(
            {
                "kind": kind,
                "name": name,
                "per_set": {
                    k: [s[name]["fired"], s[name]["right"]] if name in s else [0, 0]
                    for k, s in per_set.items()
                },
                "fired": fired,
                "right": right,
                "precision": round(right / fired, 4) if fired else None,
                "ci95": [round(lo, 3), round(hi, 3)],
                "wrong": wrong,
            }
        )
    return rows


def show(rows: list[dict[str, Any]]) -> None:
    short = [k.replace("judge_labels", "dev").replace("dev_", "") for k in rows[0]["per_set"]]
    print("| kind | rule / guard | " + " | ".join(short) + " | fired | right | precision [95 % CI] |")
    print("|---|---|" + "---:|" * (len(short) + 3))
    for row in rows:
        cells = " | ".join(f"{f}/{r}" if f else "–" for f, r in row["per_set"].values())
        p = (
            "–"
            if row["precision"] is None
            else f"{row['precision']:.3f} [{row['ci95'][0]:.2f}, {row['ci95'][1]:.2f}]"
        )
        low = row["precision"] is not None and row["precision"] < MIN_PRECISION and row["fired"] >= MIN_FIRED
        mark = " ⚠" if low else ""
        print(f"| {row['kind']} | `{row['name']}` | {cells} | {row['fired']} | {row['right']} | {p}{mark} |")
    for row in rows:
        if row["wrong"]:
            print(f"{row['name']} wrong on: {', '.join(row['wrong'])}")
    print()


def set_name(path: Path) -> str:
    """A label set's name: "dev" for judge_labels.jsonl, NAME for judge_labels_NAME.jsonl."""
    return "dev" if path.stem == "judge_labels" else path.stem.removeprefix("judge_labels_")


def label_sets(exclude: list[str]) -> list[Path]:
    """The label sets, without those named in `exclude` (exact names, never opened)."""
    return [p for p in sorted((HERE / "data").glob("judge_labels*.jsonl")) if set_name(p) not in exclude]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="NAME",
        help="leave out the set judge_labels_NAME.jsonl",
    )
    args = parser.parse_args()
    sets = label_sets(args.exclude)
    items = {p.stem: load(p) for p in sets}
    names = [
        *(("rule", x.name) for x in RULES["en"]),
        *(("guard", x.name) for x in (*GUARDS["en"], *EXTRA_GUARDS["en"])),
    ]
    alone = table_rows({k: count(v) for k, v in items.items()}, names)
    behind = {
        k: count_behind_llm(v, rec) for k, v in items.items() if (rec := recorded_default(k)) is not None
    }
    behind_rows = table_rows(behind, [n for n in names if n[1] in {g.name for g in GUARDS["en"]}])
    out = HERE / "results" / "rule_precision.json"
    result = {
        "sets": [p.name for p in sets],
        "excluded": args.exclude,
        "alone": alone,
        "behind_recorded_llm_correct": behind_rows,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    show(alone)
    show(behind_rows)


if __name__ == "__main__":
    main()
