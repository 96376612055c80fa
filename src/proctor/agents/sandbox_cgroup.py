"""A control group per sandboxed program, where the machine lets us make one: the program's memory (every
process, tmpfs pages included) and process count are then bounded as a whole, and every process it left
behind is killed by the group, whatever uid or session it moved to.

cgroup v2 is used when its memory and pids controllers can be given to a child of our own group; else the
v1 `memory` and `pids` hierarchies (hybrid machines); else nothing (an ordinary user without systemd
delegation), and the sandbox falls back to per-process rlimits and size-limited tmpfs mounts. Which one a
run got is recorded in its result (`SandboxResult.enforced`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)
Kind = Literal["v2", "v1"]
_counter = itertools.count()


@dataclass(frozen=True)
class CgroupBase:
    """Where this process may create program groups: one directory (v2) or the memory and pids ones (v1)."""

    kind: Kind
    memory: Path
    pids: Path


def _own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> this process's group path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                found[c] = path
    return found


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of every cgroup mount."""
    out = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            pre, _, post = line.partition(" - ")
            fields, tail = pre.split(), post.split()
            if len(fields) > 4 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                out.append((fields[4], tail[0], set(tail[2].split(","))))
    return out


def _try_child(parent: Path, files: tuple[str, ...]) -> bool:
    """Whether we can create a group under `parent` that has `files` (the controllers' knobs)."""
    probe = parent / f"proctor-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return all((probe / f).exists() for f in files)
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def _v2_base(mount: str, own: str) -> Path | None:
    base = Path(mount + own)
    try:
        available = set((base / "cgroup.controllers").read_text().split())
    except OSError:
        return None
    if not {"memory", "pids"} <= available:
        return None
    if not _try_child(base, ("memory.max", "pids.max")):
        with contextlib.suppress(OSError):  # fails while our group holds processes, unless it is the root
            (base / "cgroup.subtree_control").write_text("+memory +pids")
    return base if _try_child(base, ("memory.max", "pids.max", "cgroup.kill")) else None


@functools.cache
def cgroup_base() -> CgroupBase | None:
    """The place for program groups on this machine, as this user (cached per process), or None."""
    own, mounts = _own_paths(), _mounts()
    for point, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in own and (base := _v2_base(point, own[""])) is not None:
            return CgroupBase("v2", base, base)
    v1: dict[str, Path] = {}
    for point, fstype, opts in mounts:
        for c in ("memory", "pids"):
            if fstype == "cgroup" and c in opts and c in own:
                v1[c] = Path(point + own[c])
    if len(v1) == 2 and all(
        _try_child(v1[c], (f"{c}.{knob}",)) for c, knob in (("memory", "limit_in_bytes"), ("pids", "max"))
    ):
        return CgroupBase("v1", v1["memory"], v1["pids"])
    return None


class ProgramCgroup:
    """The group of one run: created with its limits, joined by the program before exec, killed and
    removed after it."""

    def __init__(self, base: CgroupBase, memory_bytes: int, processes: int) -> None:
        self.kind = base.kind
        name = f"proctor-{os.getpid()}-{next(_counter)}"
        self.dirs = [base.memory / name] if base.kind == "v2" else [base.memory / name, base.pids / name]
        for d in self.dirs:
            d.mkdir()
        try:
            if base.kind == "v2":
                d = self.dirs[0]
                (d / "memory.max").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):  # no swap accounting: nothing to bound
                    (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(processes))
            else:
                mem, pids = self.dirs
                (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):  # swap accounting off: memsw is absent
                    (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
                (pids / "pids.max").write_text(str(processes))
        except BaseException:
            self.remove()
            raise
        self.procs_files = [str(d / "cgroup.procs") for d in self.dirs]

    def join(self) -> None:
        """In the forked child before exec (and before it drops privileges): move itself into the group.
        Only os calls here."""
        pid = str(os.getpid()).encode()
        for f in self.procs_files:
            fd = os.open(f, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def _pids(self) -> list[int]:
        with contextlib.suppress(OSError):
            return [int(p) for p in Path(self.procs_files[0]).read_text().split()]
        return []

    def kill(self) -> None:
        """SIGKILL every process in the group (a few rounds, in case one was forking)."""
        if self.kind == "v2":
            with contextlib.suppress(OSError):
                (self.dirs[0] / "cgroup.kill").write_text("1")
        for _ in range(50):
            pids = self._pids()
            if not pids:
                return
            for p in pids:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            time.sleep(0.01)

    def ran_out_of_memory(self) -> bool:
        """Whether the kernel killed one of the program's processes for the group's memory limit."""
        mem = self.dirs[0]
        try:
            if self.kind == "v2":
                events = dict(ln.split() for ln in (mem / "memory.events").read_text().splitlines())
            else:
                events = dict(ln.split() for ln in (mem / "memory.oom_control").read_text().splitlines())
            return int(events.get("oom_kill", 0)) > 0
        except (OSError, ValueError):
            return False

    def remove(self) -> None:
        """Never raises: a group that cannot go yet (a process still exiting) is retried, then logged."""
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                log.warning("sandbox: could not remove the control group %s", d)
