"""The rageval workflows on the embedded models: one row per system of finished rageval runs (issue 30).

Run the rageval demo (all four workflows on the embedded 1.5B; `grid.action_format` json by default, set
it to text for the paper's format), then tabulate the run folders. From the repository root:

    .venv/bin/proctor demo --only rageval --out runs
    .venv/bin/python bench/rageval_workflows.py runs/demo-rageval-*

Columns: F1 and EM (with intervals), the error taxonomy's counts, the stop reasons, answers, steps per
answer, steps without a valid action (and their share of all steps), tokens and seconds per answer (the
seconds are 0 for answers served from the call cache), and the action format each system used.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from proctor import load_run
from proctor.protocols.rageval.result import RagevalResult, RagSystem


def rows(path: Path) -> list[str]:
    result = load_run(path).result
    if not isinstance(result, RagevalResult):
        raise SystemExit(f"{path}: not a finished rageval run")
    out = []
    for name, s in result.systems.items():
        if not isinstance(s, RagSystem):
            out.append(f"| {name} | not applicable: {s.not_applicable} |")
            continue
        steps = round((s.mean_steps or 0.0) * s.answered)
        share = f"{s.parse_error_steps / steps:.0%}" if steps else "—"
        cats = " ".join(f"{k} {n}" for k, n in s.categories.items() if n)
        stops = ", ".join(f"{k} {n}" for k, n in s.stops.items())
        out.append(
            f"| {name} | {s.f1.text(digits=2)} | {s.em.text(digits=2)} | {cats} | {stops} | {s.answered} | "
            f"{s.mean_steps or 0:.1f} | {s.parse_error_steps} ({share}) | {s.mean_tokens or 0:.0f} | "
            f"{s.mean_latency_s or 0:.0f} | {', '.join(s.action_formats) or '—'} |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="rageval run folders")
    args = ap.parse_args()
    print(
        "| system | F1 | EM | taxonomy | stops | answers | steps / answer | unparseable steps "
        "| tokens / answer | s / answer | actions |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path in args.runs:
        print("\n".join(rows(path)))


if __name__ == "__main__":
    main()
