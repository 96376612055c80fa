"""How far can a small local judge be trusted? Judge configurations against human labels (issue 17).

The labelled set is `bench/data/judge_labels.jsonl` (hand-written from the fictional sample corpus: question,
reference, a candidate answer, the human label, the hard case it exercises — see bench/data/README.md).
Every configuration judges every item through proctor's one judging path (`judge_answer`: deterministic
rules, the LLM judge(s) with the reference, the guards) and the one model-call path (with its cache):

* ``1.5b``                 — the embedded 1.5B as plain LLM judge with the reference (reason, then verdict);
* ``1.5b+rules``           — deterministic equivalence first (`proctor.judging.equivalence.decide`);
* ``1.5b+rules+guard``     — plus the guards after an LLM "correct" (`equivalence.veto`), own verdict;
* ``…+vo@T``               — verdict-only (no reason), "correct" when P(correct) from logprobs reaches T;
* ``1.5b default``         — proctor's default: rules, guards, verdict-only, the threshold left to proctor
  (`GUARDED_THRESHOLD`);
* ``…+sc3``                — self-consistency: 3 samples at temperature 0.7, majority;
* ``1.5b&0.5b…``           — an ensemble of both embedded judges;
* ``0.5b`` / ``0.5b+rules+guard`` — the embedded 0.5B.

The labelled items are split by id: odd ids are the TUNING half (thresholds are chosen there: see the
sweep in the JSON), even ids the other half. `--labels bench/data/judge_labels_heldout.jsonl` runs the same
on the held-out set, written afterwards and blind to the rules and thresholds. For each configuration, on
all items and on the even half: accuracy against the humans, Cohen's kappa (with its bootstrap interval,
`proctor.metaeval`), the confusion matrix, false "correct" verdicts, the share decided without a model
call, seconds per judgment (uncached calls only), accuracy per hard case, and how many verdicts carry a
P(correct) (from logprobs).
Writes bench/results/judge_agreement.json and prints markdown tables. From the repository root:

    .venv/bin/python bench/judge_agreement.py                 # all configurations, the labelled set
    .venv/bin/python bench/judge_agreement.py --labels bench/data/judge_labels_heldout.jsonl   # held out
    .venv/bin/python bench/judge_agreement.py --only 1.5b+rules+guard --threads 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from proctor.judging.equivalence import GUARD_METHODS, veto
from proctor.judging.llm import OWN_VERDICT, JudgeStyle
from proctor.kit.shared.answers import AnswerItem
from proctor.kit.shared.judges import GUARDED_THRESHOLD, Combine, Panel, judge_answer
from proctor.metaeval.agreement import agreement
from proctor.models import get_model
from proctor.models.base import Model

HERE = Path(__file__).resolve().parent
LABELS = HERE / "data" / "judge_labels.jsonl"
# Verdicts that took a model call: the LLM(s), and the guards that overrule their "correct".
CACHE_HIT_S = 0.3
M15, M05 = "local/qwen2.5-coder-1.5b", "local/qwen2.5-coder-0.5b"
VO = JudgeStyle(verdict_only=True)  # threshold unset: proctor's default for a guarded judge with reference
TUNED = GUARDED_THRESHOLD
DEFAULT = f"1.5b default (rules+guard+vo@{GUARDED_THRESHOLD})"


@dataclass(frozen=True)
class JudgeConfig:
    name: str
    models: tuple[str, ...]
    rules: bool
    guard: bool
    style: JudgeStyle = field(default_factory=JudgeStyle)
    combine: Combine = "majority"


CONFIGS = [
    JudgeConfig("1.5b", (M15,), rules=False, guard=False),
    JudgeConfig("1.5b+rules", (M15,), rules=True, guard=False),
    JudgeConfig("1.5b+rules+guard", (M15,), rules=True, guard=True, style=JudgeStyle(threshold=OWN_VERDICT)),
    JudgeConfig(
        f"1.5b+rules+guard+vo@{OWN_VERDICT}",
        (M15,),
        True,
        True,
        JudgeStyle(verdict_only=True, threshold=OWN_VERDICT),
    ),
    JudgeConfig(DEFAULT, (M15,), rules=True, guard=True, style=VO),
    JudgeConfig(
        f"1.5b+rules+guard+vo@{TUNED}+sc3",
        (M15,),
        True,
        True,
        JudgeStyle(verdict_only=True, threshold=TUNED, samples=3, temperature=0.7),
    ),
    JudgeConfig("0.5b", (M05,), rules=False, guard=False),
    JudgeConfig("0.5b+rules+guard", (M05,), rules=True, guard=True),
    JudgeConfig(
        f"0.5b+rules+guard+vo@{TUNED}", (M05,), True, True, JudgeStyle(verdict_only=True, threshold=TUNED)
    ),
    JudgeConfig(
        f"1.5b&0.5b+rules+guard+vo@{TUNED} majority",
        (M15, M05),
        True,
        True,
        JudgeStyle(verdict_only=True, threshold=TUNED),
        combine="majority",
    ),
]
SWEEP = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def load_items(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def as_answer(item: dict[str, Any]) -> AnswerItem:
    return AnswerItem(
        candidate="labelled",
        question_id=item["id"],
        question=item["question"],
        reference_answer=item["reference"],
        answer=item["answer"],
        em=0.0,
        f1=0.0,
    )


async def run_config(panel: Panel, cfg: JudgeConfig, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Judge every item; per item the verdict, the deciding method and P(correct)."""
    per_item: dict[str, dict[str, Any]] = {}
    seconds: list[float] = []
    failures: dict[str, str] = {}
    for it in items:
        t0 = time.monotonic()
        try:
            j = await judge_answer(
                as_answer(it), kind="with_reference", model=panel, rules=cfg.rules, guards=cfg.guard
            )
        except Exception as e:  # recorded per item with its cause, never scored
            failures[it["id"]] = f"{type(e).__name__}: {e}"
            continue
        elapsed = time.monotonic() - t0
        data = j.data or {}
        method = str(data.get("method", "llm"))
        if is_llm(method) and elapsed > CACHE_HIT_S:  # a cache hit takes milliseconds
            seconds.append(elapsed)
        per_item[it["id"]] = {"verdict": j.verdict, "method": method, "p_correct": data.get("p_correct")}
    return {
        "config": {**asdict(cfg), "style": asdict(cfg.style)},
        "failed": failures,
        "seconds_per_llm_judgment": round(sum(seconds) / len(seconds), 2) if seconds else None,
        "llm_judgments_timed": len(seconds),
        "items": per_item,
    }


def is_llm(method: str) -> bool:
    return method.startswith("llm") or method in GUARD_METHODS


def scores(items: list[dict[str, Any]], per_item: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Agreement with the humans on `items` (those judged)."""
    judged = [it for it in items if it["id"] in per_item]
    human = [it["label"] for it in judged]
    method_v = [str(per_item[it["id"]]["verdict"]) for it in judged]
    ag = agreement(human, method_v, categories=["correct", "incorrect"])
    pairs = list(zip(human, method_v, strict=True))
    methods = Counter(per_item[it["id"]]["method"] for it in judged)
    by_case: dict[str, list[bool]] = defaultdict(list)
    for it, v in zip(judged, method_v, strict=True):
        by_case[it["case"]].append(v == it["label"])
    probs = [p for it in judged if (p := per_item[it["id"]]["p_correct"]) is not None]
    return {
        "n": len(judged),
        "accuracy": ag.accuracy,
        "kappa": ag.kappa,
        "kappa_interval": [ag.kappa_lo, ag.kappa_hi],
        "confusion": ag.confusion,
        "false_correct": sum(1 for h, m in pairs if m == "correct" and h == "incorrect"),
        "false_incorrect": sum(1 for h, m in pairs if m == "incorrect" and h == "correct"),
        "methods": dict(methods),
        "decided_without_call": round(
            sum(n for m, n in methods.items() if not is_llm(m)) / max(len(judged), 1), 4
        ),
        "with_probability": len(probs),
        "by_case": {c: round(sum(v) / len(v), 3) for c, v in sorted(by_case.items())},
    }


def sweep(
    items: list[dict[str, Any]], per_item: dict[str, dict[str, Any]], guards: bool
) -> dict[str, dict[str, Any]]:
    """Kappa at each threshold, re-deciding the LLM verdicts from their recorded P(correct), with the guards
    applied to every "correct" as the judging path does (rules as recorded)."""
    by_id = {it["id"]: it for it in items}
    out: dict[str, dict[str, Any]] = {}
    for t in SWEEP:
        redone: dict[str, dict[str, Any]] = {}
        for key, r in per_item.items():
            v = r["verdict"]
            if (r["method"].startswith("llm") or r["method"] in GUARD_METHODS) and r["p_correct"] is not None:
                v = "correct" if r["p_correct"] >= t else "incorrect"
                it = by_id[key]
                if (
                    v == "correct"
                    and guards
                    and veto(it["answer"], it["reference"], it["question"]) is not None
                ):
                    v = "incorrect"
            redone[key] = {**r, "verdict": v}
        tune = scores([it for it in items if int(it["id"][1:]) % 2 == 1], redone)
        held = scores([it for it in items if int(it["id"][1:]) % 2 == 0], redone)
        out[f"{t:.1f}"] = {"tuning_kappa": tune["kappa"], "even_half_kappa": held["kappa"]}
    return out


def row(name: str, r: dict[str, Any], secs: Any) -> str:
    lo, hi = r["kappa_interval"]
    kappa = "—" if r["kappa"] is None else f"{r['kappa']:.2f} [{lo:.2f}, {hi:.2f}]"
    return (
        f"| {name} | {r['n']} | {r['accuracy']:.3f} | {kappa} | {r['false_correct']} | "
        f"{r['false_incorrect']} | {r['decided_without_call']:.0%} | {secs} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", help="configuration name (repeatable)")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: all cores)")
    ap.add_argument("--labels", type=Path, default=LABELS, help="labelled JSONL (default: the tuning set)")
    ap.add_argument("--out", type=Path, default=None, help="default: bench/results/<labels name>.json")
    args = ap.parse_args()
    items = load_items(args.labels)
    out = args.out or HERE / "results" / f"{args.labels.stem.replace('judge_labels', 'judge_agreement')}.json"
    even_half = [it for it in items if int(it["id"][1:]) % 2 == 0]
    configs = [c for c in CONFIGS if not args.only or c.name in args.only]
    opts: dict[str, Any] = {"timeout_s": 900}
    if args.threads:
        opts["threads"] = args.threads
    models: dict[str, Model] = {}
    results = []
    for cfg in configs:
        panel = Panel(
            tuple(models.setdefault(m, get_model(m, **opts)) for m in cfg.models),
            style=cfg.style,
            combine=cfg.combine,
        )
        t0 = time.monotonic()
        r = asyncio.run(run_config(panel, cfg, items))
        r["wall_seconds"] = round(time.monotonic() - t0, 1)
        r["all"] = scores(items, r["items"])
        r["even_half"] = scores(even_half, r["items"])
        if cfg.style.samples == 1 and len(cfg.models) == 1:
            r["threshold_sweep"] = sweep(items, r["items"], cfg.guard)
        results.append(r)
        kappas = f"kappa {r['all']['kappa']} (even half {r['even_half']['kappa']})"
        print(f"{cfg.name}: {kappas}, {r['wall_seconds']} s")
    report = {
        "labels": str(args.labels.resolve().relative_to(HERE.parent)),
        "items": len(items),
        "even_half_items": len(even_half),
        "human_correct": sum(it["label"] == "correct" for it in items),
        "cpus": os.cpu_count(),
        "threads": args.threads or None,
        "results": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    cols = ["judge", "n", "accuracy", "κ [95 %]", "false correct", "false incorrect", "no call", "s / call"]
    for part in ("all", "even_half"):
        print(f"\n{part}:\n| " + " | ".join(cols) + " |")
        print("|---|---|---|---|---|---|---|---|")
        for r in results:
            print(row(r["config"]["name"], r[part], r["seconds_per_llm_judgment"]))
    print(f"\nwritten {out}")


if __name__ == "__main__":
    main()
