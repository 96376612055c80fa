"""Scale-out on Ray (the optional `ray` extra: `pip install 'proctor[ray]'`), used with `executor: ray`.

- `ray_session`: start a local Ray instance or join a cluster — dashboard off, explicit CPUs, a deadline —
  and turn every way that can fail (Ray not installed, no cluster at the address, a start that hangs)
  into a `UserError`, so the CLI exits 2 with one paragraph instead of a traceback or a hang.
- `corpus_pipeline`: corpus reading, chunking and embedding as Ray Data `map_batches` stages writing a
  chunk table (Parquet); the driver reads it back into the same `Corpus` the local path builds.
- `replica_actors`: the embedded llama.cpp servers of a `local/` model with `replicas`, one per Ray actor,
  spread over the cluster's nodes.

Nothing here imports `ray` at module import time: a run with the default `executor: local` never needs it.
Only bulk, stateless work goes to Ray; the run store, the call cache, the budget and the protocol stay in
the driver, and workers hand back small results (file paths, base URLs).
"""

from __future__ import annotations

from proctor.scale.corpus_pipeline import load_run_corpus

__all__ = ["load_run_corpus"]
