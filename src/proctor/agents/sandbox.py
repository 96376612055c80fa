"""A sandbox for model-written programs (PAL): never run generated code anywhere else.

A program runs in a subprocess of the system Python (`python -I -S`), bounded as a whole: a control group
of its own where the machine lets us make one (memory over all its processes, tmpfs included, and their
number; `sandbox_cgroup`), else per-process rlimits; size-limited tmpfs mounts as its only writable places
(/work, /tmp, /dev/shm); CPU seconds, file size and open files per process; an empty environment (no API
keys), no network, no terminal, and a wall-clock kill of everything it started. As root, each run also
gets a uid of its own from an unused range (root is exempt from RLIMIT_NPROC, and runs cannot signal each
other). Every result says how each limit was enforced (`SandboxResult.enforced`). Isolation comes in
tiers, probed once per process and recorded in the run:

* `bubblewrap` — `bwrap --unshare-all --new-session --die-with-parent`: new user, pid, network, IPC, UTS
  and cgroup namespaces. The program sees exactly: `/usr` (read-only: the system Python and its standard
  library), `/bin`, `/sbin`, `/lib*` (read-only, or the symlinks into /usr), a fresh `/proc` (its own
  processes only), a minimal read-only `/dev`, and the sized tmpfs mounts, its program bound read-only
  into /work; the root is read-only. Not /etc, /root, /home, /var, the host's /tmp, the project, its
  virtualenv or any secret in them.
* `unshare` — `unshare --net --pid --fork --kill-child --mount --ipc --uts --map-root-user`, then a root
  built like bubblewrap's (`_UNSHARE_ROOT`: read-only binds, its own /proc, /dev without a terminal, the
  sized tmpfs mounts), `pivot_root` into it with the host's tree detached, and the program exec'd without
  capabilities (it cannot unmount /proc or enter other namespaces). Where that cannot be built the tier
  is unavailable (install bubblewrap), never a weaker one.
* `none` — refused unless the config says `sandbox: unsafe_local`.

The run's host folder only holds the program and the boot file, and is removed without following links
(`sandbox_cleanup.remove_tree`) after every process of the program is killed.

Tools reach the program as plain functions (`sandbox_boot.py` defines them); each call is one JSON line on
an inherited pipe to the parent, which validates it, runs the real tool (recorded as a `ToolCall`) and
writes the reply back — the program itself never touches the database, the corpus files or the network.
The parent never trusts that channel: malformed or oversized requests get an error reply, the number of
calls is capped, and replies the program does not read cannot block the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from proctor.agents.sandbox_cgroup import ProgramCgroup, cgroup_base
from proctor.agents.sandbox_cleanup import remove_tree
from proctor.agents.tools import Toolbox, ToolCall, tool
from proctor.errors import UserError

Tier = Literal["bubblewrap", "unshare", "none"]
Cause = Literal[
    "finished", "timeout", "cpu_limit", "memory_limit", "output_limit", "error", "killed", "refused"
]
SYSTEM_PYTHON = "/usr/bin/python3"
UNSHARE_FULL = ("--net", "--pid", "--fork", "--kill-child", "--mount", "--ipc", "--uts", "--map-root-user")
# The unshare tier's own root, built as root of the new user namespace and then given up: a tmpfs holding
# read-only binds of /usr and the /lib dirs, its own /proc (its pid namespace), size-limited tmpfs for /work,
# /tmp and /dev/shm, a /dev of four devices (no tty); pivot_root into it, detach the host's tree, and exec
# the program with no capabilities left (so it can neither unmount /proc nor enter other namespaces).
# $1: the run's host folder (holding root/, program.py, boot.py); $2, $3: size and inodes of each tmpfs;
# then the program's argv.
_UNSHARE_ROOT = r"""
set -eu
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
T="$1"; SIZE="$2"; INODES="$3"; shift 3; R="$T/root"
mount -t tmpfs -o size=1m,mode=755 none "$R"
for d in usr bin lib lib64 lib32 sbin; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$R/$d"
  elif [ -d "/$d" ]; then mkdir "$R/$d"; mount --rbind "/$d" "$R/$d"; mount -o remount,bind,ro "$R/$d"; fi
done
mkdir "$R/proc" "$R/work" "$R/tmp" "$R/dev" "$R/old"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
mount -t tmpfs -o "size=$SIZE,nr_inodes=$INODES,mode=1777,nosuid,nodev" none "$R/tmp"
mount -t tmpfs -o "size=$SIZE,nr_inodes=$INODES,mode=755,nosuid,nodev" none "$R/work"
for f in program.py boot.py; do
  touch "$R/work/$f"; mount --bind "$T/$f" "$R/work/$f"; mount -o remount,bind,ro "$R/work/$f"
done
mount -t tmpfs -o size=64k,mode=755,nosuid none "$R/dev"
for n in null zero full random urandom; do touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"; done
mkdir "$R/dev/shm"; mount -o remount,bind,ro,nosuid "$R/dev"
mount -t tmpfs -o "size=$SIZE,nr_inodes=$INODES,mode=1777,nosuid,nodev" none "$R/dev/shm"
cd "$R"; pivot_root . old; cd /
umount -l /old; rmdir /old
mount -o remount,bind,ro /
cd /work
exec setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- "$@"
"""
_BOOT = Path(__file__).with_name("sandbox_boot.py")
_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
# Per-run uids (as root): far above system, login and usual subordinate-id ranges; 64 slots per process.
_UID_BASE = 1_600_000_000
_UID_SLOTS = 64
log = logging.getLogger(__name__)
_GRACE_S = 1.0  # after the program ends: time for its pipes to drain before we stop reading them


class SandboxLimits(BaseModel):
    cpu_seconds: int = Field(10, ge=1)
    wall_seconds: float = Field(20.0, gt=0)
    memory_mb: int = Field(512, ge=64)
    file_size_mb: int = Field(16, ge=1)
    disk_mb: int = Field(32, ge=1, description="size of each writable place (/work, /tmp, /dev/shm)")
    processes: int = Field(16, ge=1, description="processes the program may run at once (beyond its own)")
    open_files: int = Field(64, ge=16)
    output_chars: int = Field(20_000, ge=100)
    tool_calls: int = Field(50, ge=0)
    message_bytes: int = Field(65_536, ge=1024, description="size of one tool request from the program")


class TierProbe(BaseModel):
    tier: Tier
    python: str
    unavailable: dict[str, str] = Field(default_factory=dict)  # tier -> why it could not be used
    unshare_args: list[str] = Field(default_factory=list)  # the flags the unshare tier uses


class SandboxResult(BaseModel):
    ok: bool
    cause: Cause
    answer: str | None = None
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    signal: int | None = None  # the signal that ended the program, when one did
    tool_calls: list[ToolCall] = Field(default_factory=list)
    wall_s: float = 0.0
    tier: Tier
    enforced: dict[str, str] = Field(
        default_factory=dict, description="limit -> how this run enforced it (cgroup, rlimit, tmpfs size)"
    )


def _interpreter() -> str:
    """The system Python when there is one (it lives under /usr, which the bubblewrap tier shows, and any
    uid can run it), else this interpreter."""
    return SYSTEM_PYTHON if os.access(SYSTEM_PYTHON, os.X_OK) else sys.executable


def _bwrap_cmd(hostdir: str, python: str, disk_bytes: int) -> list[str]:
    """Every writable place is a tmpfs of `disk_bytes` (/dev/shm too: not the host's, nor the unbounded
    /dev that `--dev` makes, which is made read-only); the program and the boot file are bound read-only
    into /work."""
    size = str(disk_bytes)
    cmd = [
        "bwrap", "--unshare-all", "--new-session", "--die-with-parent",
        "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
        "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--size", size, "--tmpfs", "/tmp",
        "--size", size, "--tmpfs", "/work",
        "--ro-bind", f"{hostdir}/program.py", "/work/program.py",
        "--ro-bind", f"{hostdir}/boot.py", "/work/boot.py",
        "--chdir", "/work",
    ]  # fmt: skip
    tail = ["--remount-ro", "/"]  # bubblewrap's own root is an unbounded tmpfs: nothing may write it
    for top in ("/bin", "/lib", "/lib64", "/lib32", "/sbin"):
        p = Path(top)
        if p.is_symlink():
            cmd += ["--symlink", os.readlink(p), top]
        elif p.is_dir():
            cmd += ["--ro-bind", top, top]
    if not python.startswith("/usr/"):  # no system Python: show this interpreter's prefix, read-only
        prefix = str(Path(python).resolve().parent.parent)
        cmd += ["--ro-bind", prefix, prefix]
    return cmd + tail


def _wrap(tier: Tier, hostdir: str, python: str, disk_bytes: int) -> list[str]:
    if tier == "bubblewrap":
        return _bwrap_cmd(hostdir, python, disk_bytes)
    if tier == "unshare":
        inodes = str(max(1024, disk_bytes // 4096))  # one per page of the size: no flood of empty files
        return ["unshare", *UNSHARE_FULL, "sh", "-c", _UNSHARE_ROOT, "sh", hostdir, str(disk_bytes), inodes]
    return []


def _prepare(hostdir: str, code: str, uid: int | None) -> None:
    """The run's host folder: the program, the boot file and (for the unshare tier) its root's mount point,
    owned by the run's uid."""
    Path(hostdir, "program.py").write_text(code, encoding="utf-8")
    shutil.copy(_BOOT, Path(hostdir, "boot.py"))
    Path(hostdir, "root").mkdir()
    if uid is not None:
        for p in (hostdir, f"{hostdir}/program.py", f"{hostdir}/boot.py", f"{hostdir}/root"):
            os.chown(p, uid, uid)


def _has_pid_namespace(tier: Tier) -> bool:
    """Whether everything the program spawns dies with it (then its exit code > 128 means a signal)."""
    return tier in ("bubblewrap", "unshare")


_uid_lock = threading.Lock()
_uids_in_use: set[int] = set()


@contextlib.contextmanager
def _run_uid() -> Iterator[int | None]:
    """A uid for one run when we are root (None otherwise: we cannot switch, the limits count our uid)."""
    if os.geteuid() != 0:
        yield None
        return
    base = _UID_BASE + (os.getpid() % 30_000) * _UID_SLOTS
    with _uid_lock:
        uid = next((base + s for s in range(_UID_SLOTS) if base + s not in _uids_in_use), base)
        _uids_in_use.add(uid)
    try:
        yield uid
    finally:
        with _uid_lock:
            _uids_in_use.discard(uid)


def _processes_of(uid: int) -> int:
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{d}").st_uid == uid:
                    n += 1
    return n


def _enter(limits: SandboxLimits, nproc: int, uid: int | None, group: ProgramCgroup | None) -> None:
    """In the child before exec: join the run's control group (while still privileged), take the run's
    uid, set the resource limits. Only os calls here: this runs in a forked child of a threaded process."""
    if group is not None:
        group.join()
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb * mb, limits.file_size_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _own_processes(tier: Tier) -> int:
    """Processes a run has before the program forks: bubblewrap's two and the interpreter; unshare, our
    pid-1 reaper and the program; or the interpreter alone."""
    return 3 if _has_pid_namespace(tier) else 1


def _spawn_options(
    limits: SandboxLimits, uid: int | None, own: int, group: ProgramCgroup | None = None
) -> dict[str, Any]:
    """Session, uid, control group and limits of a sandboxed child. The process rlimit counts processes
    per uid: the run's own ones (`own`) plus `limits.processes` — and, without a uid of our own, what our
    uid already runs (the control group, where there is one, counts the program's alone)."""
    nproc = limits.processes + own + _processes_of(uid if uid is not None else os.getuid())
    return {
        "start_new_session": True,
        "preexec_fn": functools.partial(_enter, limits, nproc, uid, group),
        "env": dict(_ENV),
    }


def _new_cgroup(limits: SandboxLimits, own: int) -> ProgramCgroup | None:
    base = cgroup_base()
    if base is None:
        return None
    try:
        return ProgramCgroup(base, limits.memory_mb * 1024 * 1024, limits.processes + own)
    except OSError as e:  # the machine took it back (a full hierarchy, a read-only remount): rlimits only
        log.warning("sandbox: no control group for this run (%s); per-process limits only", e)
        return None


def _enforced(
    tier: Tier, limits: SandboxLimits, uid: int | None, group: ProgramCgroup | None
) -> dict[str, str]:
    """How each limit was enforced in a run, in words for the trajectory."""
    own = _own_processes(tier)
    if group is not None:
        memory = f"{limits.memory_mb} MB for all its processes, tmpfs included (cgroup {group.kind})"
        processes = (
            f"{limits.processes + own} processes at once, the sandbox's own included (cgroup {group.kind})"
        )
    else:
        memory = (
            f"{limits.memory_mb} MB address space per process (RLIMIT_AS), at most "
            f"{limits.processes + own} processes; tmpfs not counted (no cgroup)"
        )
        processes = f"{limits.processes} beyond the run's own (RLIMIT_NPROC on " + (
            "a uid of the run's own)" if uid is not None else "your uid)"
        )
    if tier == "none":
        disk = f"{limits.file_size_mb} MB per file (RLIMIT_FSIZE), no total: the host's disk"
    else:
        disk = (
            f"/work, /tmp, /dev/shm: tmpfs of {limits.disk_mb} MB each, nothing on the host's disk; "
            f"{limits.file_size_mb} MB per file (RLIMIT_FSIZE)"
        )
    kill = {"bubblewrap": "pid namespace", "unshare": "pid namespace", "none": "process group"}[tier]
    if group is not None:
        kill += f", cgroup {group.kind}"
    if uid is not None:
        kill += ", run uid"
    return {
        "memory": memory,
        "disk": disk,
        "processes": processes,
        "cpu": f"{limits.cpu_seconds} s per process (RLIMIT_CPU); the whole program by the wall clock",
        "wall": f"{limits.wall_seconds:g} s, then every process killed ({kill})",
    }


_PROBE_CODE = (
    "import os, socket\n"
    "assert not os.path.exists('/etc/passwd'), 'the host root is visible'\n"
    "print('ok', *sorted(n for _, n in socket.if_nameindex()))\n"
)
_TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def _works(tier: Tier, python: str) -> str | None:
    """None when `tier` runs a program as the sandbox would run it and it sees no network interface but
    loopback and nothing of the host's root; else why not."""
    tmp = tempfile.mkdtemp(prefix="proctor-probe-")
    try:
        with _run_uid() as uid:
            _prepare(tmp, _PROBE_CODE, uid)
            try:
                out = subprocess.run(
                    [*_wrap(tier, tmp, python, 1024 * 1024), python, "-I", "-S", "program.py"],
                    capture_output=True, text=True, timeout=20, cwd=tmp,
                    **_spawn_options(SandboxLimits(), uid, 3),
                )  # fmt: skip
            except (OSError, subprocess.SubprocessError) as e:
                return f"{type(e).__name__}: {e}"
            if uid is not None:
                _kill_uid(uid)
    finally:
        remove_tree(tmp)
    if out.returncode != 0 or not out.stdout.startswith("ok"):
        return f"exit {out.returncode}: {out.stderr.strip()[-300:]}"
    if out.stdout.split()[1:] not in ([], ["lo"]):
        return f"the network is still visible: {out.stdout.strip()}"
    return None


@functools.cache
def probe_tier() -> TierProbe:
    """The strongest isolation this machine has (cached per process), and why the others are missing.
    Every tier is tried (a fraction of a second each), so a caller may also pick a weaker one that works."""
    python = _interpreter()
    why: dict[str, str] = {}
    if shutil.which("bwrap") is None:
        why["bubblewrap"] = (
            "bwrap is not installed (Debian: apt-get install bubblewrap; install.sh does it as root)"
        )
    elif (problem := _works("bubblewrap", python)) is not None:
        why["bubblewrap"] = problem
    unshare_args: list[str] = []
    missing = [
        t for t in ("unshare", "setpriv", "pivot_root", "mount") if shutil.which(t, path=_TOOL_PATH) is None
    ]
    if missing:
        why["unshare"] = f"{', '.join(missing)} not installed (Debian: util-linux, mount)"
    elif (problem := _works("unshare", python)) is not None:
        # Without its own mount and pid namespaces the tier would show the host's files, sockets and
        # processes: refused, not weakened.
        why["unshare"] = f"unshare {' '.join(UNSHARE_FULL)}: {problem}"
    else:
        unshare_args = list(UNSHARE_FULL)
    tier: Tier = next((t for t in ("bubblewrap", "unshare") if t not in why), "none")
    return TierProbe(tier=tier, python=python, unavailable=why, unshare_args=unshare_args)


def refuse_message(probe: TierProbe) -> str:
    reasons = "; ".join(f"{t}: {r}" for t, r in probe.unavailable.items())
    return (
        f"agent.sandbox: this machine offers no isolation for model-written programs ({reasons}). Install "
        f"bubblewrap (Debian: apt-get install bubblewrap), or set `sandbox: unsafe_local` in the agent's "
        f"config to run them as plain subprocesses at your own risk."
    )


class _ToolServer:
    """The parent's end of the tool channel: one JSON request line in, one JSON reply line out."""

    def __init__(self, toolbox: Toolbox | None, limits: SandboxLimits) -> None:
        self.toolbox = toolbox
        self.limits = limits
        self.calls: list[ToolCall] = []
        self.answer: str | None = None
        self.answered = False
        self.requests = 0

    async def serve(self, req_r: int, resp_w: int) -> None:
        loop = asyncio.get_running_loop()
        # one request line may hold an answer too: room for its characters escaped
        reader = asyncio.StreamReader(limit=self.limits.message_bytes + 8 * self.limits.output_chars)
        r_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(req_r, "rb", buffering=0)
        )
        # Replies go through a non-blocking transport: a program that stops reading them fills the pipe,
        # and a blocking write would stall the event loop and with it the wall-clock kill.
        w_transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(resp_w, "wb", buffering=0))
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # a line over the reader's limit: no well-behaved program sends one
                    self._write(w_transport, {"error": "tool request too large; the tool channel is closed"})
                    break
                if not line:
                    break
                self.requests += 1
                reply = await self.handle(line)
                if reply is not None:
                    self._write(w_transport, reply)
                if (
                    w_transport.is_closing()
                    or w_transport.get_write_buffer_size() > self.limits.message_bytes * 4
                    or self.requests > self.limits.tool_calls + 100
                ):
                    break  # the program does not read its replies, or floods the channel: stop serving
        finally:
            r_transport.close()
            w_transport.close()

    @staticmethod
    def _write(transport: asyncio.WriteTransport, reply: dict[str, Any]) -> None:
        if not transport.is_closing():
            transport.write((json.dumps(reply, ensure_ascii=False) + "\n").encode())

    async def handle(self, line: bytes) -> dict[str, Any] | None:
        """The reply to one request line (None for the answer message, which gets none)."""
        try:
            msg = json.loads(line)
        except ValueError:
            return {"error": "invalid_request: not a JSON line"}
        if not isinstance(msg, dict):
            return {"error": "invalid_request: not a JSON object"}
        if "answer" in msg and "tool" not in msg:
            value = msg["answer"]
            self.answer = None if value is None else str(value)[: self.limits.output_chars]
            self.answered = True
            return None
        if self.toolbox is None or not self.toolbox.tools:
            return {"error": "no tools are available to this program"}
        if len(self.calls) >= self.limits.tool_calls:
            return {"error": f"tool_limit: at most {self.limits.tool_calls} tool calls per program"}
        name, kwargs, given = msg.get("tool"), msg.get("kwargs"), msg.get("args")
        if not isinstance(name, str):
            return {"error": "invalid_request: no tool name"}
        args: Any = dict(kwargs) if isinstance(kwargs, dict) else kwargs
        found = self.toolbox.tools.get(name)
        if isinstance(args, dict) and isinstance(given, list) and given and found is not None:
            # f(x, y): positional arguments fill the parameters in order; extra ones fail validation
            params = list(found.arguments.model_fields)
            if len(given) > len(params):
                args["__extra__"] = given[len(params) :]
            args.update(zip(params, given, strict=False))
        try:
            call = await self.toolbox.call(name, args)
        except Exception as e:  # Toolbox.call catches a tool's errors; this is for anything it missed
            call = ToolCall(name=name, arguments={"_raw": repr(args)[:200]}, error=f"tool_exception: {e!r}")
        self.calls.append(call)
        return {"error": call.error} if call.error else {"result": call.result}


async def _read_capped(fd: int, into: bytearray, cap: int, on_overflow: Callable[[], None]) -> None:
    """Collect up to `cap` bytes from a pipe; past it, call `on_overflow` (which kills the program)."""
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        while data := await stream.read(65536):
            room = cap - len(into)
            into += data[: max(room, 0)]
            if len(data) > room:
                on_overflow()
    finally:
        transport.close()


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid` (a uid of one run's own), a few rounds in case one was forking."""
    for _ in range(5):
        found = False
        for d in os.listdir("/proc"):
            if d.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{d}").st_uid == uid:
                        os.kill(int(d), signal.SIGKILL)
                        found = True
        if not found:
            return
        time.sleep(0.01)


async def run_program(
    code: str,
    *,
    toolbox: Toolbox | None = None,
    tools: Mapping[str, Callable[..., Any]] | None = None,
    limits: SandboxLimits | None = None,
    tier: Tier | None = None,
    allow_unsafe: bool = False,
) -> SandboxResult:
    """Run `code` in the sandbox; its tool calls are served from `toolbox` (or from `tools`, plain typed
    functions by name). Never raises for what the program does — its failures are the result's `cause` —
    and raises UserError when no isolation is available and `allow_unsafe` is false."""
    if toolbox is not None and tools is not None:
        raise ValueError("pass toolbox or tools, not both")
    if tools is not None:
        toolbox = Toolbox([tool(fn, name=name) for name, fn in tools.items()])
    limits = limits or SandboxLimits()
    probe = probe_tier()
    chosen: Tier = tier or probe.tier
    if chosen == "none" and not allow_unsafe:
        raise UserError(refuse_message(probe))
    if chosen in probe.unavailable:
        raise UserError(
            f"agent.sandbox: the {chosen} tier cannot isolate programs here ({probe.unavailable[chosen]}), "
            "and proctor does not run them half-isolated. Install bubblewrap (Debian: apt-get install "
            "bubblewrap) or leave the tier to proctor's probe."
        )
    started = time.monotonic()
    server = _ToolServer(toolbox, limits)
    tmp = tempfile.mkdtemp(prefix="proctor-sandbox-")
    own = _own_processes(chosen)
    group: ProgramCgroup | None = None
    try:
        with _run_uid() as uid:
            group = _new_cgroup(limits, own)
            enforced = _enforced(chosen, limits, uid, group)
            code_, timed_out, overflow, out, err = await _supervise(
                code, tmp, chosen, probe, limits, uid, group, server
            )
            ran_out = group is not None and group.ran_out_of_memory()
    finally:
        if group is not None:
            group.kill()
            group.remove()
        remove_tree(tmp)
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    sig = -code_ if code_ is not None and code_ < 0 else None
    if sig is None and code_ is not None and code_ > 128 and _has_pid_namespace(chosen):
        sig = code_ - 128  # bubblewrap (and our pid-1 reaper) report a signal as 128 + its number
    cause = _cause(code_, sig, stderr, timed_out, overflow)
    if ran_out and cause in ("error", "killed"):
        cause = "memory_limit"
    text = server.answer if server.answer is not None else (stdout.strip()[: limits.output_chars] or None)
    return SandboxResult(
        ok=cause == "finished",
        cause=cause,
        answer=text if cause == "finished" else None,
        stdout=stdout[: limits.output_chars],
        stderr=stderr[-limits.output_chars :],
        exit_code=code_,
        signal=sig,
        tool_calls=server.calls,
        wall_s=round(time.monotonic() - started, 3),
        tier=chosen,
        enforced=enforced,
    )


async def _supervise(
    code: str,
    tmp: str,
    chosen: Tier,
    probe: TierProbe,
    limits: SandboxLimits,
    uid: int | None,
    group: ProgramCgroup | None,
    server: _ToolServer,
) -> tuple[int | None, bool, bool, bytearray, bytearray]:
    """Start the program, serve its tools, read its output, and end it and everything it started.
    Returns (exit code, timed out, output overflowed, stdout, stderr)."""
    _prepare(tmp, code, uid)
    workdir = tmp if chosen == "none" else "/work"
    # Our own pipes for every channel (not asyncio's PIPE): we can close our ends whatever the program
    # left running, so nothing outlives the run, not even in the event loop.
    pipes = [os.pipe() for _ in range(4)]  # requests, replies, stdout, stderr
    (req_r, req_w), (resp_r, resp_w), (out_r, out_w), (err_r, err_w) = pipes
    conf = {
        "req": req_w, "resp": resp_r, "tools": sorted(server.toolbox.tools) if server.toolbox else [],
        "max_request": limits.message_bytes, "max_answer": limits.output_chars,
    }  # fmt: skip
    argv = [
        *_wrap(chosen, tmp, probe.python, limits.disk_mb * 1024 * 1024),
        probe.python, "-I", "-S", f"{workdir}/boot.py", json.dumps(conf),
    ]  # fmt: skip
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=out_w, stderr=err_w, cwd=tmp,
            pass_fds=(req_w, resp_r), **_spawn_options(limits, uid, _own_processes(chosen), group),
        )  # fmt: skip
    except BaseException:
        for fd in (fd for pair in pipes for fd in pair):
            os.close(fd)
        raise
    for fd in (req_w, resp_r, out_w, err_w):  # the child's ends
        os.close(fd)
    overflow = False

    def kill_group() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def on_overflow() -> None:
        nonlocal overflow
        overflow = True
        kill_group()

    out, err = bytearray(), bytearray()
    cap = limits.output_chars * 4
    tasks = [
        asyncio.ensure_future(server.serve(req_r, resp_w)),
        asyncio.ensure_future(_read_capped(out_r, out, cap, on_overflow)),
        asyncio.ensure_future(_read_capped(err_r, err, cap, on_overflow)),
    ]
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout=limits.wall_seconds)
    except TimeoutError:
        timed_out = True
        kill_group()
        await proc.wait()
    finally:
        if proc.returncode is None:  # we were cancelled: take the program down with us
            kill_group()
        # What the program left behind: with a pid namespace it died with the program; its control
        # group or its own uid (as root) find it even when it left the process group; else only the
        # process group can.
        if group is not None:
            group.kill()
        if uid is not None:
            _kill_uid(uid)
        elif not _has_pid_namespace(chosen):
            kill_group()
        # The pipes close once every process holding them is gone; whatever escaped (possible only
        # without a pid namespace and a uid of our own) cannot keep us waiting.
        _, pending = await asyncio.wait(tasks, timeout=_GRACE_S)
        for t in pending:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return proc.returncode, timed_out, overflow, out, err


def _cause(code: int | None, sig: int | None, stderr: str, timed_out: bool, overflow: bool) -> Cause:
    if timed_out:
        return "timeout"
    if overflow:
        return "output_limit"
    if code == 0:
        return "finished"
    last = (stderr.strip().splitlines() or [""])[-1]
    if last.startswith("MemoryError") or "Cannot allocate memory" in last:
        return "memory_limit"
    if sig == signal.SIGXCPU:
        return "cpu_limit"
    if sig == signal.SIGKILL:
        return "killed"
    return "error"
