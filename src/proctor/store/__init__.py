"""The run store: one SQLite file per run directory. Everything a report shows is in it."""

from proctor.store.run_store import RunStore

__all__ = ["RunStore"]
