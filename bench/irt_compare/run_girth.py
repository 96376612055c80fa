"""Fit one simulated data set with girth, in girth's own venv (numpy < 2); called by irt_recovery.py.

Usage: run_girth.py RESPONSES.npy MODEL OUT.npz
  MODEL: 2pl or 3pl; RESPONSES: subjects x items, NaN = missing.

Data go in and out as files so that girth's numpy 1.x never shares a process with proctor's numpy 2.
"""

from __future__ import annotations

import sys
import time

import girth
import numpy as np


def main() -> None:
    path, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
    y = np.load(path)
    data = np.where(np.isnan(y), girth.INVALID_RESPONSE, y).T.astype(int)  # girth: items x subjects
    t0, c0 = time.perf_counter(), time.process_time()
    if model == "2pl":
        res = girth.twopl_mml(data)
        a, b, c = res["Discrimination"], res["Difficulty"], np.zeros(data.shape[0])
        theta = np.asarray(res["Ability"], dtype=float)
    elif model == "3pl":
        res = girth.threepl_mml(data)
        a, b, c = res["Discrimination"], res["Difficulty"], res["Guessing"]
        theta = np.asarray(girth.ability_3pl_eap(data, b, a, c), dtype=float)
    else:
        raise SystemExit(f"unknown model {model!r}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    np.savez(
        out,
        discrimination=a,
        difficulty=b,
        guessing=c,
        ability=theta,
        wall=wall,
        cpu=cpu,
        version=girth.__version__ if hasattr(girth, "__version__") else "0.8.0",
    )


if __name__ == "__main__":
    main()
