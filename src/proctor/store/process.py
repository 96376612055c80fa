"""Which process runs a run: its pid and host, stored when the run starts (artifact `process`), so a run
left `running` by a process that is gone (killed with -9, the machine rebooted) reads as `interrupted`.

A pid is reused by the system in time; the process's start time (Linux `/proc/<pid>/stat`) is stored too and
must match, so a new process under an old pid does not keep a dead run `running`."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import BaseModel

ARTIFACT = "process"


class ProcessMark(BaseModel):
    pid: int
    host: str
    start_ticks: int | None = None  # the process's start time in clock ticks since boot (Linux), or None


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces; field 22 counts from after it.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def this_process() -> ProcessMark:
    pid = os.getpid()
    return ProcessMark(pid=pid, host=socket.gethostname(), start_ticks=_start_ticks(pid))


def is_gone(mark: ProcessMark) -> bool:
    """Whether the process `mark` names has ended. Only known on the host that ran it: a run started on
    another machine is never called gone from here."""
    if mark.host != socket.gethostname():
        return False
    try:
        os.kill(mark.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, under another user
        pass
    if mark.start_ticks is not None:
        now = _start_ticks(mark.pid)
        return now is not None and now != mark.start_ticks
    return False
