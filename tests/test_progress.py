"""Off a terminal, progress is plain lines per stage (start, every LINE_INTERVAL_S, end) with usage, never
wrapped (log readers grep them)."""

from __future__ import annotations

import io
import re

from rich.console import Console

from proctor.kit import progress as progress_mod
from proctor.kit.progress import ProgressReporter


def test_plain_lines_when_not_a_terminal(monkeypatch) -> None:
    buf = io.StringIO()
    live = {"calls": 3, "cached": 1, "errors": 0, "tokens": 1234, "cost_usd": 0.5}
    now = [0.0]
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: now[0])
    with ProgressReporter(live, console=Console(file=buf, force_terminal=False, width=40)) as p:
        stage = p.stage("answering", 4)
        for t in (1.0, 12.0, 13.0, 30.0):
            now[0] = t
            stage.advance()
        stage.finish()
        p.stage("nothing to do", 0).finish()
    lines = buf.getvalue().splitlines()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "
    assert re.fullmatch(
        stamp + r"answering: 0/4 · elapsed 0:00:00 · ETA \? · calls 3 \(cached 1, errors 0\) · "
        r"tokens 1,234 · \$0\.5000",
        lines[0],
    )
    # 12 s after the start line: 2 of 4 done in 12 s, so 12 s to go
    assert re.fullmatch(stamp + r"answering: 2/4 · elapsed 0:00:12 · ETA 0:00:12 · .*", lines[1])
    assert re.fullmatch(stamp + r"answering: 4/4 · elapsed 0:00:30 · ETA 0:00:00 · .*", lines[-1])
    assert len(lines) == 3 and "nothing to do" not in buf.getvalue()


def test_silent_when_disabled() -> None:
    buf = io.StringIO()
    live = {"calls": 0, "cached": 0, "errors": 0, "tokens": 0, "cost_usd": 0.0}
    with ProgressReporter(live, enabled=False, console=Console(file=buf, force_terminal=False)) as p:
        stage = p.stage("x", 2)
        stage.advance(2)
        stage.finish()
    assert buf.getvalue() == ""
