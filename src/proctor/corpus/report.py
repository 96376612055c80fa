"""`LoadReport`: what was loaded and what was skipped, so a corpus never shrinks silently."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LoadReport:
    """Counts plus (path, reason) for every skipped file, record or line; filled while loading."""

    root: str = ""
    files_seen: int = 0  # files considered (hidden files are not counted)
    files_loaded: int = 0  # files that gave at least one document
    documents: int = 0
    chunks: int = 0  # unique chunks kept
    duplicate_chunks: int = 0  # chunks dropped because an identical chunk was already kept
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append((path, reason))

    @property
    def files_skipped(self) -> int:
        return self.files_seen - self.files_loaded

    def summary_lines(self, max_skips: int = 20) -> list[str]:
        """Human-readable lines for `proctor ingest`; long skip lists are cut to `max_skips` entries."""
        lines = [
            f"corpus: {self.root}",
            f"files: {self.files_seen} seen, {self.files_loaded} loaded, {self.files_skipped} skipped",
            f"documents: {self.documents}",
            f"chunks: {self.chunks}"
            + (f" ({self.duplicate_chunks} duplicate chunks dropped)" if self.duplicate_chunks else ""),
        ]
        if self.skipped:
            lines.append(f"skipped ({len(self.skipped)}):")
            lines.extend(f"  {path}: {reason}" for path, reason in self.skipped[:max_skips])
            if len(self.skipped) > max_skips:
                lines.append(f"  ... and {len(self.skipped) - max_skips} more")
        return lines
