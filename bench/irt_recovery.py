"""IRT parameter recovery: proctor vs an oracle vs girth, plus hierarchical and adaptive checks.

Simulates exams with known parameters and reports, side by side on the same data:

* ``proctor``      — `fit_irt` with its defaults (marginal ML by EM, EAP abilities);
* ``proctor-jml``  — `fit_irt(method="jml")` (joint MAP), for reference;
* ``oracle``       — `fit_items` with abilities fixed to the truth (an upper bound for item recovery);
* ``girth``        — girth 0.8 (`twopl_mml` / `threepl_mml`), run in its own venv (numpy < 2) in a
                     subprocess; data exchanged as .npy / .npz files.

Then: hierarchical fits (component ordering) and adaptive testing (items used vs the full exam).
Writes bench/results/irt_recovery.json. Run from the repository root:

    bash bench/irt_compare/setup_venv.sh          # once: bench/.venv-irt with numpy<2 + girth
    .venv/bin/python bench/irt_recovery.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from proctor.psychometrics import (
    fit_hierarchical,
    fit_irt,
    fit_items,
    simulate_adaptive,
    simulate_responses,
)

ROOT = Path(__file__).resolve().parent.parent
GIRTH_PY = ROOT / "bench" / ".venv-irt" / "bin" / "python"
GIRTH_RUNNER = ROOT / "bench" / "irt_compare" / "run_girth.py"

SCENARIOS = {
    # name: (generating model, guessing spec, fit kwargs for proctor / oracle, girth model)
    "2pl": ("2pl", None, {"model": "2pl"}, "2pl"),
    "3pl-est": ("3pl", "uniform", {"model": "3pl", "guessing": "estimate"}, "3pl"),
    "3pl-fixed": ("3pl", 0.25, {"model": "3pl", "n_options": 4, "guessing": "fixed"}, "3pl"),
}


def _corr(x: np.ndarray, y: np.ndarray) -> float | None:
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def _timed(fn: Any) -> tuple[Any, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def _metrics(est: dict[str, np.ndarray], truth: dict[str, np.ndarray]) -> dict[str, Any]:
    m: dict[str, Any] = {}
    for key in ("difficulty", "discrimination", "guessing", "ability"):
        if key in est and key in truth:
            m[f"r_{key}"] = _corr(np.asarray(est[key]), truth[key])
            m[f"rmse_{key}"] = float(np.sqrt(np.mean((np.asarray(est[key]) - truth[key]) ** 2)))
    return m


def _run_girth(y: np.ndarray, model: str, timeout: float) -> dict[str, Any]:
    if not GIRTH_PY.exists():
        return {"status": "skipped: bench/.venv-irt missing (run bench/irt_compare/setup_venv.sh)"}
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "y.npy", Path(tmp) / "out.npz"
        np.save(src, y)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [str(GIRTH_PY), str(GIRTH_RUNNER), str(src), model, str(out)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
            )
        except subprocess.TimeoutExpired:
            return {"status": f"timeout after {timeout:.0f} s"}
        if proc.returncode != 0:
            return {"status": "error", "stderr": proc.stderr[-2000:]}
        z = np.load(out)
        return {
            "status": "ok",
            "est": {k: z[k] for k in ("discrimination", "difficulty", "guessing", "ability")},
            "wall_s": float(z["wall"]),
            "cpu_s": float(z["cpu"]),
            "wall_incl_process_s": time.perf_counter() - t0,
        }


def recovery(args: argparse.Namespace, name: str, rep: int) -> dict[str, Any]:
    _, guess, fit_kw, girth_model = SCENARIOS[name]
    rng = np.random.default_rng([args.seed, rep, list(SCENARIOS).index(name)])
    s, j = args.subjects, args.items
    theta = rng.normal(size=s)
    a = rng.lognormal(0.0, 0.3, j)
    b = rng.normal(0.0, 1.0, j)
    c = None
    if guess == "uniform":
        c = rng.uniform(0.1, 0.3, j)
    elif guess is not None:
        c = np.full(j, float(guess))
    y = simulate_responses(theta, a, b, c, missing=args.missing, rng=rng)
    truth = {"difficulty": b, "discrimination": a, "ability": theta}
    if guess == "uniform":
        truth["guessing"] = c  # type: ignore[assignment]
    rows: dict[str, Any] = {}
    model = fit_kw["model"]
    kw = {k: v for k, v in fit_kw.items() if k != "model"}

    fit, wall, cpu = _timed(lambda: fit_irt(y, model, **kw))
    rows["proctor"] = {**_metrics(_as_dict(fit), truth), "wall_s": wall, "cpu_s": cpu, "n_iter": fit.n_iter}
    if not args.no_jml:
        fit_j, wall, cpu = _timed(lambda: fit_irt(y, model, method="jml", **kw))
        rows["proctor-jml"] = {**_metrics(_as_dict(fit_j), truth), "wall_s": wall, "cpu_s": cpu}
    oracle, wall, cpu = _timed(lambda: fit_items(y, theta, model, **kw))
    om = _metrics(_as_dict(oracle), truth)
    om.pop("r_ability", None)
    om.pop("rmse_ability", None)
    rows["oracle"] = {**om, "wall_s": wall, "cpu_s": cpu}
    if not args.no_girth and name in args.girth_scenarios.split(","):
        g = _run_girth(y, girth_model, args.girth_timeout)
        if g["status"] == "ok":
            rows["girth"] = {**_metrics(g["est"], truth), "wall_s": g["wall_s"], "cpu_s": g["cpu_s"]}
            if name == "3pl-fixed":
                rows["girth"]["note"] = "girth's 3PL always estimates c (in [0, 0.33]); no fixed-c option"
        else:
            rows["girth"] = {"status": g["status"], **({"stderr": g["stderr"]} if "stderr" in g else {})}
    checks = _checks(name, rows)
    return {
        "scenario": name,
        "rep": rep,
        "shape": [s, j],
        "missing": args.missing,
        "rows": rows,
        "checks": checks,
    }


def _as_dict(fit: Any) -> dict[str, np.ndarray]:
    return {
        "difficulty": fit.difficulty,
        "discrimination": fit.discrimination,
        "guessing": fit.guessing,
        "ability": fit.ability,
    }


def _checks(name: str, rows: dict[str, Any]) -> dict[str, bool]:
    p, o = rows["proctor"], rows["oracle"]
    out = {"ability_r>=0.97": (p["r_ability"] or 0) >= 0.97}
    if name == "2pl":
        out["difficulty_r>=0.97"] = (p["r_difficulty"] or 0) >= 0.97
        out["discrimination_r>=0.87"] = (p["r_discrimination"] or 0) >= 0.87
    else:
        for key in ("difficulty", "discrimination", "guessing"):
            if o.get(f"r_{key}") is not None and p.get(f"r_{key}") is not None:
                out[f"{key}_r_within_0.03_of_oracle"] = p[f"r_{key}"] >= o[f"r_{key}"] - 0.03
    return out


def hierarchical(args: argparse.Namespace) -> dict[str, Any]:
    """4 LLMs x 5 retrievers x 3 ICL levels, 300 items; ordering of each factor's levels."""
    shape = {"llm": 4, "retriever": 5, "icl": 3}
    designs = {
        # Evenly spaced effects (gaps 0.8 / 0.4 / 0.5), shuffled: orderings that are resolvable.
        "spaced": lambda rng: {
            "llm": rng.permutation(np.linspace(-1.2, 1.2, 4)),
            "retriever": rng.permutation(np.linspace(-0.8, 0.8, 5)),
            "icl": rng.permutation(np.linspace(-0.5, 0.5, 3)),
        },
        # Random N(0, 0.5) effects: some gaps are far below the component SE.
        "random": lambda rng: {f: rng.normal(0, 0.5, k) for f, k in shape.items()},
    }
    out: dict[str, Any] = {}
    for dname, make in designs.items():
        runs = []
        for seed in range(args.hier_seeds):
            rng = np.random.default_rng([args.seed, 77, seed, len(dname)])
            truth = make(rng)
            combos = list(itertools.product(*(range(k) for k in shape.values())))
            factors = {f: [f"{f}{c[i]}" for c in combos] for i, f in enumerate(shape)}
            theta = np.array([sum(truth[f][c[i]] for i, f in enumerate(shape)) for c in combos])
            n_items = 300
            y = simulate_responses(
                theta, rng.lognormal(0, 0.3, n_items), rng.normal(size=n_items), missing=0.1, rng=rng
            )
            fit, wall, _ = _timed(lambda y=y, factors=factors: fit_hierarchical(y, factors, model="2pl"))
            per = {}
            for f, eff in truth.items():
                est = np.array([fit.components[f][f"{f}{i}"] for i in range(len(eff))])
                se = np.array([fit.component_se[f][f"{f}{i}"] for i in range(len(eff))])
                gaps = np.diff(np.sort(eff - eff.mean()))
                # Scale of the fit relative to the truth (abilities standardised to sd 1).
                scale = float(np.std(theta))
                per[f] = {
                    "spearman": float(spearmanr(est, eff).statistic),
                    "min_true_gap": float(gaps.min()),
                    "min_true_gap_in_se": float(gaps.min() / scale / se.mean()),
                }
            runs.append(
                {"seed": seed, "factors": per, "wall_s": wall, "r_ability": _corr(fit.ability, theta)}
            )
        perfect = {f: sum(r["factors"][f]["spearman"] > 1 - 1e-9 for r in runs) for f in shape}
        out[dname] = {"runs": runs, "perfect_orderings": perfect, "n_runs": len(runs)}
    return {"levels": shape, "items": 300, "missing": 0.1, "model": "2pl", "designs": out}


def adaptive(args: argparse.Namespace) -> dict[str, Any]:
    """Calibrate a 300-item 2PL exam on 500 subjects, then run CAT for 50 new subjects."""
    rng = np.random.default_rng([args.seed, 5])
    n_items = 300
    a, b = rng.lognormal(0, 0.3, n_items), rng.normal(size=n_items)
    calib = simulate_responses(rng.normal(size=500), a, b, missing=0.1, rng=rng)
    fit = fit_irt(calib, "2pl")
    subjects = rng.normal(size=50)
    rows = simulate_responses(subjects, a, b, rng=rng)
    results = []
    for target in (0.4, 0.3, 0.25, 0.2):
        sims = [simulate_adaptive(fit, row, se_target=target) for row in rows]
        frac = np.array([s.fraction_items for s in sims])
        diff = np.array([s.abs_diff for s in sims])
        se = np.array([s.result.se for s in sims])
        full_se = np.array([s.full_se for s in sims])
        results.append(
            {
                "se_target": target,
                "items_mean": float(np.mean([s.result.n_items for s in sims])),
                "fraction_mean": float(frac.mean()),
                "fraction_median": float(np.median(frac)),
                "within_adaptive_se": float(np.mean(diff <= se)),
                "within_2_adaptive_se": float(np.mean(diff <= 2 * se)),
                "within_full_se": float(np.mean(diff <= full_se)),
                "rms_diff": float(np.sqrt(np.mean(diff**2))),
                "mean_adaptive_se": float(se.mean()),
                "mean_full_se": float(full_se.mean()),
                "stopped_at_target": float(np.mean([s.result.stop_reason == "se_target" for s in sims])),
            }
        )
    return {"items": n_items, "calibration_subjects": 500, "subjects": 50, "results": results}


def _fmt(v: Any, nd: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def print_recovery(res: list[dict[str, Any]]) -> None:
    cols = ["r_difficulty", "r_discrimination", "r_guessing", "r_ability", "wall_s", "cpu_s"]
    print(f"\n{'scenario':<10} {'rep':>3} {'fitter':<12} " + " ".join(f"{c:>16}" for c in cols))
    for r in res:
        for fitter, row in r["rows"].items():
            if "status" in row:
                print(f"{r['scenario']:<10} {r['rep']:>3} {fitter:<12} {row['status']}")
                continue
            vals = [_fmt(row.get(c), 2 if c.endswith("_s") else 3) for c in cols]
            print(f"{r['scenario']:<10} {r['rep']:>3} {fitter:<12} " + " ".join(f"{v:>16}" for v in vals))
        print(
            f"{'':<10} checks: " + ", ".join(f"{k}={'PASS' if v else 'FAIL'}" for k, v in r["checks"].items())
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subjects", type=int, default=500)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--missing", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--scenarios", default="2pl,3pl-est,3pl-fixed")
    ap.add_argument("--no-girth", action="store_true")
    ap.add_argument(
        "--girth-scenarios", default="2pl,3pl-est,3pl-fixed", help="scenarios that also run girth"
    )
    ap.add_argument("--no-hier", action="store_true")
    ap.add_argument("--no-adaptive", action="store_true")
    ap.add_argument("--no-jml", action="store_true")
    ap.add_argument("--girth-timeout", type=float, default=3600.0)
    ap.add_argument("--hier-seeds", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "irt_recovery.json"))
    args = ap.parse_args()

    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    out: dict[str, Any] = {
        "config": vars(args),
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_start": os.getloadavg(),
        },
        "recovery": [],
    }
    t0 = time.perf_counter()

    def dump() -> None:
        out["machine"]["loadavg_end"] = os.getloadavg()
        out["total_wall_s"] = time.perf_counter() - t0
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2, default=float))

    rec = out["recovery"]
    for name in args.scenarios.split(","):
        for rep in range(args.reps):
            r = recovery(args, name, rep)
            rec.append(r)
            print_recovery([r])
            dump()  # keep what is done if a slow library run is interrupted
    if not args.no_hier:
        hier = hierarchical(args)
        out["hierarchical"] = hier
        print("\nhierarchical (4 LLM x 5 retriever x 3 ICL, 300 items, 2PL):")
        for dname, d in hier["designs"].items():
            sp = {f: [round(r["factors"][f]["spearman"], 3) for r in d["runs"]] for f in hier["levels"]}
            print(f"  {dname:<7} perfect orderings {d['perfect_orderings']} of {d['n_runs']}; spearman {sp}")
        dump()
    if not args.no_adaptive:
        cat = adaptive(args)
        out["adaptive"] = cat
        print("\nadaptive (300-item 2PL exam, 50 subjects):")
        head = ("se_target", "items", "fraction", "|d|<=SE", "|d|<=2SE", "rms|d|", "full SE")
        print("  " + " ".join(f"{h:>9}" for h in head))
        for r in cat["results"]:
            print(
                f"  {r['se_target']:>9.2f} {r['items_mean']:>9.1f} {r['fraction_mean']:>9.3f} "
                f"{r['within_adaptive_se']:>9.2f} {r['within_2_adaptive_se']:>9.2f} {r['rms_diff']:>9.3f} "
                f"{r['mean_full_se']:>9.3f}"
            )
    dump()
    print(f"\nwrote {args.out} ({out['total_wall_s']:.0f} s)")
    failed = [k for r in rec for k, v in r["checks"].items() if not v]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
