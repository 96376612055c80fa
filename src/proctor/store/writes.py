"""Writes to a run's store from outside a run: results recomputed over a finished run and kept with it
(the meta-evaluation's `metaeval.*` metrics, `proctor.viewer.metaeval_run`). Nothing else writes to a run
store after its run; human labels have their own database (`proctor.store.labels`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from proctor.store.record import RUN_FILE, MetricRecord
from proctor.store.run_store import RunStore


def replace_metrics(folder: Path, prefix: str, rows: Iterable[MetricRecord]) -> int:
    """Delete the run's metrics named `prefix...` and store `rows` instead (a result recomputed as a whole
    replaces its old rows); returns how many were stored."""
    store = RunStore(Path(folder) / RUN_FILE)
    try:
        store.drop_metrics(prefix)
        n = 0
        for m in rows:
            if not m.name.startswith(prefix):
                raise ValueError(f"metric {m.name!r} is not under {prefix!r}")
            store.put_metric(m.name, m.subject, m.value, lo=m.lo, hi=m.hi, n=m.n, data=m.data)
            n += 1
        return n
    finally:
        store.close()
