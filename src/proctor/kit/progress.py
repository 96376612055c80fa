"""Progress for long work: rich bars with ETA on a terminal; plain lines elsewhere (CI logs, `nohup`,
`| tee`), where bars would print nothing for minutes. Both show live calls, tokens and cost; a plain
line also carries the wall-clock time, the stage's elapsed time and its ETA, so a log read later says
when and how far a run got:

    2025-01-31 14:02:11 answering: 40/120 · elapsed 0:01:05 · ETA 0:02:10 · calls 52 (cached 0, ...) ...
"""

from __future__ import annotations

import time
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

LINE_INTERVAL_S = 10.0  # off a terminal: at most one line per stage this often (plus start and end)


def clock_text(seconds: float) -> str:
    """Seconds as H:MM:SS."""
    s = max(0, round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def eta_text(done: int, total: int, elapsed: float) -> str:
    """Time left at the stage's rate so far: "?" before the first unit is done, 0:00:00 when finished."""
    if done >= total:
        return clock_text(0)
    if done <= 0 or elapsed <= 0:
        return "?"
    return clock_text(elapsed / done * (total - done))


def usage_text(live: dict[str, Any]) -> str:
    return (
        f"calls {live['calls']} (cached {live['cached']}, errors {live['errors']}) · "
        f"tokens {live['tokens']:,} · ${live['cost_usd']:.4f}"
    )


class _UsageColumn(ProgressColumn):
    def __init__(self, live: dict[str, Any]) -> None:
        super().__init__()
        self.live = live

    def render(self, task: Any) -> Text:
        return Text(usage_text(self.live), style="dim")


class ProgressReporter:
    """Stage progress; silent when `enabled` is False (tests, `--quiet`)."""

    def __init__(self, live: dict[str, Any], *, enabled: bool = True, console: Console | None = None) -> None:
        self.enabled = enabled
        self.live = live
        self.console = console or Console(stderr=True)
        self.plain = enabled and not self.console.is_terminal
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            _UsageColumn(live),
            console=self.console,
            disable=not enabled or self.plain,
            transient=False,
        )

    def __enter__(self) -> ProgressReporter:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def stage(self, description: str, total: int) -> Stage:
        return Stage(self, description, total)

    def line(self, description: str, done: int, total: int, elapsed: float = 0.0) -> None:
        """One plain progress line: time, stage, units done, elapsed, ETA, live usage."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time()))
        self.console.print(
            f"{stamp} {description}: {done}/{total} · elapsed {clock_text(elapsed)} · "
            f"ETA {eta_text(done, total, elapsed)} · {usage_text(self.live)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    def note(self, text: str) -> None:
        """A line of its own (e.g. the run folder at the start), on a terminal and off it; silent when
        disabled."""
        if self.enabled:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)


class Stage:
    def __init__(self, reporter: ProgressReporter, description: str, total: int) -> None:
        self._reporter = reporter
        self._description = description
        self._total = total
        self._done = 0
        self._task = reporter._progress.add_task(description, total=total)
        self._started = self._last_line = time.monotonic()
        if reporter.plain and total:
            reporter.line(description, 0, total)

    def advance(self, n: int = 1) -> None:
        self._done += n
        r = self._reporter
        r._progress.advance(self._task, n)
        now = time.monotonic()
        if r.plain and self._done < self._total and now - self._last_line >= LINE_INTERVAL_S:
            self._last_line = now
            r.line(self._description, self._done, self._total, now - self._started)

    def finish(self) -> None:
        """The stage's work is over (also when it had nothing to do)."""
        if self._reporter.plain and self._total:
            elapsed = time.monotonic() - self._started
            self._reporter.line(self._description, self._done, self._total, elapsed)
