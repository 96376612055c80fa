"""Progress for long work: rich bars with ETA plus live calls, tokens and cost from the run store."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class _UsageColumn(ProgressColumn):
    def __init__(self, live: dict[str, Any]) -> None:
        super().__init__()
        self.live = live

    def render(self, task: Any) -> Text:
        d = self.live
        return Text(
            f"calls {d['calls']} (cached {d['cached']}, errors {d['errors']}) · tokens {d['tokens']:,} · "
            f"${d['cost_usd']:.4f}",
            style="dim",
        )


class ProgressReporter:
    """Stage bars; silent when `enabled` is False (tests, non-interactive use)."""

    def __init__(self, live: dict[str, Any], *, enabled: bool = True, console: Console | None = None) -> None:
        self.enabled = enabled
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            _UsageColumn(live),
            console=console or Console(stderr=True),
            disable=not enabled,
            transient=False,
        )

    def __enter__(self) -> ProgressReporter:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def stage(self, description: str, total: int) -> Stage:
        return Stage(self._progress, self._progress.add_task(description, total=total))


class Stage:
    def __init__(self, progress: Progress, task_id: Any) -> None:
        self._progress = progress
        self._task = task_id

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def finish(self) -> None:
        """The stage's work is over (also when it had nothing to do)."""
