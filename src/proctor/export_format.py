"""The formats `proctor export` writes (a module of its own so the CLI names them without loading the
exporters)."""

from enum import StrEnum


class ExportFormat(StrEnum):
    inspect = "inspect"  # an inspect_ai eval log (`.eval` or `.json`)
    jsonl = "jsonl"  # one `proctor.store.export.ExportSample` per line
