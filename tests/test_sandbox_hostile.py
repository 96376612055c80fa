"""Hostile programs against the sandbox, as root and as an ordinary user, under every tier this machine has.

Each program attacks one way — escape, exfiltration, persistence after the call, resource exhaustion summed
over processes, cleanup attacks, host interference — and each test checks from the host that the attack
failed: a planted world-readable secret never reaches the output, listening sockets (a path, an abstract
name, TCP on loopback) never get a connection, a terminal the program could write to gets nothing, files
planted in the user's home and in a world-writable folder are untouched, no process the program started
survives the call, host processes stay untraced and alive, sizes stay within the limits the run says it
enforced, and the run's host folder is gone. A tier that cannot contain a program must refuse to run it
(the runner reports `refused`), which also counts as contained.

As root, the ordinary user's runs go through tests/sandbox_hostile_runner.py, started by this test, which
drops to a user's uid before serving requests; without root this process is the ordinary user and runs
them itself (and the root runs are skipped with the reason).
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import pwd
import random
import re
import select
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from proctor.agents.sandbox import SandboxLimits, SandboxResult, probe_tier
from proctor.agents.sandbox_cleanup import remove_tree

PROBE = probe_tier()
TIERS = [t for t in ("bubblewrap", "unshare") if t not in PROBE.unavailable]
ROOT = os.geteuid() == 0
USER = "proctor-hostile"
LIMITS = SandboxLimits(
    cpu_seconds=2, wall_seconds=6, memory_mb=128, disk_mb=16, file_size_mb=4, processes=8, output_chars=4000
)
SECRET_TEXT = "sk-planted-hostile-secret"
USER_TEXT = "user-private-notes"
CHILD_MB = 48  # eight children of this much: three times the memory limit
pytestmark = pytest.mark.skipif(not TIERS, reason=f"no sandbox tier on this machine: {PROBE.unavailable}")


# --- the host the programs attack ------------------------------------------------------------------------


class Listener:
    """A listening socket that records every connection made to it (none may be)."""

    def __init__(self, family: int, address: Any) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


@dataclass
class World:
    outside: Path  # world-writable, holding a world-readable secret
    scratch: Path  # the runs' temporary folders go here (and nothing else's): left-behind ones are ours
    secret: Path
    home_file: Path  # the ordinary user's private file
    unix: Listener
    abstract: Listener
    abstract_name: str
    tcp: Listener
    tcp_port: int
    pty_master: int
    pty_path: str
    sleepers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)  # root / user -> host process

    def values(self, token: str) -> dict[str, str]:
        return {
            "SECRET": str(self.secret), "OUTSIDE": str(self.outside), "HOME_FILE": str(self.home_file),
            "HOME": str(self.home_file.parent), "SOCK": str(self.outside / "sock"),
            "ABSTRACT": self.abstract_name, "PORT": str(self.tcp_port), "PTS": self.pty_path,
            "TOKEN": token, "CHILD_MB": str(CHILD_MB),
            "SLEEPERS": repr([p.pid for p in self.sleepers.values()]),
        }  # fmt: skip

    def terminal_output(self) -> bytes:
        got = b""
        while select.select([self.pty_master], [], [], 0.05)[0]:
            try:
                got += os.read(self.pty_master, 4096)
            except OSError:
                break
        return got


def _user() -> pwd.struct_passwd | None:
    if not ROOT:
        return None
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(USER)
    if shutil.which("useradd") is None:
        return None
    subprocess.run(["useradd", "-m", USER], check=False, capture_output=True)
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(USER)
    return None


USER_ENTRY = _user()


def _start_sleeper(uid: int | None) -> subprocess.Popen[bytes]:
    def become() -> None:
        if uid is not None:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)

    return subprocess.Popen(["sleep", "600"], preexec_fn=become if uid is not None else None)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    outside = Path(tempfile.mkdtemp(prefix="proctor-hostile-", dir="/var/tmp"))
    outside.chmod(0o777)
    secret = outside / "secret.txt"
    secret.write_text(SECRET_TEXT)
    secret.chmod(0o644)
    home = Path(USER_ENTRY.pw_dir) if USER_ENTRY else Path(tempfile.mkdtemp(prefix="proctor-home-"))
    home_file = home / "notes.txt"
    home_file.write_text(USER_TEXT)
    home_file.chmod(0o600)
    if USER_ENTRY:
        os.chown(home_file, USER_ENTRY.pw_uid, USER_ENTRY.pw_gid)
    unix = Listener(socket.AF_UNIX, str(outside / "sock"))
    (outside / "sock").chmod(0o777)
    abstract_name = f"proctor-hostile-{os.getpid()}"
    abstract = Listener(socket.AF_UNIX, "\0" + abstract_name)
    tcp = Listener(socket.AF_INET, ("127.0.0.1", 0))
    master, slave = pty.openpty()
    pty_path = os.ttyname(slave)
    os.chmod(pty_path, 0o666)  # any uid could write to it: only isolation keeps a program off it
    scratch = Path(
        tempfile.mkdtemp(prefix="proctor-hostile-tmp-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
    )
    scratch.chmod(0o1777)
    saved, tempfile.tempdir = tempfile.tempdir, str(scratch)
    port = tcp.sock.getsockname()[1]
    w = World(outside, scratch, secret, home_file, unix, abstract, abstract_name, tcp, port, master, pty_path)
    w.sleepers["root"] = _start_sleeper(None)
    if USER_ENTRY:
        w.sleepers["user"] = _start_sleeper(USER_ENTRY.pw_uid)
    yield w
    for p in w.sleepers.values():
        p.kill()
        p.wait()
    for lst in (unix, abstract, tcp):
        lst.close()
    os.close(master)
    os.close(slave)
    home_file.unlink(missing_ok=True)
    tempfile.tempdir = saved
    remove_tree(str(outside))
    remove_tree(str(scratch))


class UserRunner:
    """The ordinary user's end: one runner process per module, one request line per program."""

    def __init__(self, scratch: Path) -> None:
        assert USER_ENTRY is not None
        src = str(Path(__file__).resolve().parents[1] / "src")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("sandbox_hostile_runner.py")), USER],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": src, "TMPDIR": str(scratch)},
        )  # fmt: skip
        assert self.proc.stdout is not None
        hello = json.loads(self.proc.stdout.readline())
        assert hello["uid"] == USER_ENTRY.pw_uid
        self.unavailable: dict[str, str] = hello["probe"]["unavailable"]

    def run(self, code: str, tier: str, allow_unsafe: bool) -> SandboxResult | str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        req = {"code": code, "tier": tier, "limits": LIMITS.model_dump(), "allow_unsafe": allow_unsafe}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return reply["refused"] if "refused" in reply else SandboxResult.model_validate(reply)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def user_runner(world: World) -> Iterator[UserRunner | None]:
    runner = UserRunner(world.scratch) if USER_ENTRY else None
    yield runner
    if runner:
        runner.close()


# --- the programs ----------------------------------------------------------------------------------------

# Each program is a template: @NAME@ is replaced by World.values. Most end with `answer = ...` naming what
# they managed ("contained" when nothing); the host-side checks are what decide.
PRELUDE = (
    "import os, sys, time, socket, subprocess, ctypes, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n"
)
HOSTILE: dict[str, tuple[str, str]] = {}  # name -> (class, code)


def hostile(name: str, klass: str, code: str) -> None:
    HOSTILE[name] = (klass, PRELUDE + code)


hostile(
    "read_host_secret",
    "escape",
    """
leaks = []
for p in ['@SECRET@', '/proc/1/root@SECRET@', '/proc/self/root@SECRET@', '/proc/1/cwd/../../@SECRET@']:
    try:
        leaks.append(open(p).read())
    except OSError:
        pass
answer = repr(leaks) if leaks else 'contained'
""",
)
hostile(
    "list_host_root",
    "escape",
    """
seen = [p for p in ['/etc/passwd', '/home', '/root', '/var', '@OUTSIDE@', '/work/main'] if os.path.exists(p)]
answer = repr(seen) if seen else 'contained'
""",
)
hostile(
    "see_host_processes",
    "escape",
    """
seen = []
for d in os.listdir('/proc'):
    if d.isdigit():
        try:
            if b'600' in open(f'/proc/{d}/cmdline', 'rb').read() or int(d) in @SLEEPERS@:
                seen.append(d)
        except OSError:
            pass
answer = repr(seen) if seen else 'contained'
""",
)
hostile(
    "unmount_proc",
    "escape",
    """
for path in (b'/proc', b'/work', b'/tmp', b'/'):
    libc.umount2(path, 2)
subprocess.run(['umount', '-l', '/proc'], capture_output=True)
seen = [d for d in os.listdir('/proc') if d.isdigit() and int(d) in @SLEEPERS@]
seen += [p for p in ['/etc/passwd', '@SECRET@'] if os.path.exists(p)]
answer = repr(seen) if seen else 'contained'
""",
)
hostile(
    "nested_namespace_unmount",
    "escape",
    """
CLONE_NEWNS, CLONE_NEWUSER = 0x20000, 0x10000000
libc.unshare(CLONE_NEWUSER | CLONE_NEWNS)
for path in (b'/proc', b'/'):
    libc.umount2(path, 2)
libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)
seen = [d for d in os.listdir('/proc') if d.isdigit() and int(d) in @SLEEPERS@]
seen += [p for p in ['/etc/passwd', '@SECRET@'] if os.path.exists(p)]
answer = repr(seen) if seen else 'contained'
""",
)
hostile(
    "ptrace_host",
    "escape",
    """
done = [pid for pid in @SLEEPERS@ + [os.getppid(), 1] if libc.ptrace(16, pid, 0, 0) == 0 and pid > 1]
answer = repr(done) if done else 'contained'
""",
)
hostile(
    "setns_host",
    "escape",
    """
entered = []
for pid in @SLEEPERS@ + [1]:
    for ns in ('mnt', 'pid', 'net', 'user'):
        try:
            fd = os.open(f'/proc/{pid}/ns/{ns}', os.O_RDONLY)
        except OSError:
            continue
        if libc.setns(fd, 0) == 0 and pid != 1:
            entered.append((pid, ns))
try:
    open('@OUTSIDE@/setns-marker', 'w').write('x')
    entered.append('wrote')
except OSError:
    pass
answer = repr(entered) if entered else 'contained'
""",
)
hostile(
    "network_tcp_loopback",
    "exfiltration",
    """
s = socket.socket(); s.settimeout(1)
try:
    s.connect(('127.0.0.1', @PORT@)); answer = 'connected'
except OSError:
    answer = 'contained'
""",
)
hostile(
    "network_outside",
    "exfiltration",
    """
got = []
for host in [('1.1.1.1', 53), ('8.8.8.8', 443), ('10.0.0.1', 80)]:
    s = socket.socket(); s.settimeout(1)
    try:
        s.connect(host); got.append(host)
    except OSError:
        pass
try:
    socket.getaddrinfo('pypi.org', 443); got.append('dns')
except OSError:
    pass
answer = repr(got) if got else 'contained'
""",
)
hostile(
    "unix_socket_by_path",
    "exfiltration",
    """
got = []
for path in ['@SOCK@', '/run/dbus/system_bus_socket', '/var/run/docker.sock', '/run/systemd/private']:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path); got.append(path)
    except OSError:
        pass
answer = repr(got) if got else 'contained'
""",
)
hostile(
    "unix_socket_abstract",
    "exfiltration",
    """
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('\\0@ABSTRACT@'); answer = 'connected'
except OSError:
    answer = 'contained'
""",
)
hostile(
    "write_to_terminal",
    "exfiltration",
    """
wrote = []
for path in ['/dev/tty', '@PTS@', '/dev/console', '/dev/pts/0', '/dev/pts/1']:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)  # never O_CREAT: a new file is no terminal
        os.write(fd, b'HOSTILE-TERMINAL-WRITE\\n')
        wrote.append(path)
    except OSError:
        pass
for fd in (0, 1, 2):
    if os.isatty(fd):
        os.write(fd, b'HOSTILE-TERMINAL-WRITE'); wrote.append(fd)
answer = repr(wrote) if wrote else 'contained'
""",
)
hostile(
    "user_files",
    "exfiltration",
    """
got = []
try:
    got.append(open('@HOME_FILE@').read())
except OSError:
    pass
for path in ['@HOME_FILE@', '@HOME@/pwned', '@HOME@/.bashrc', '@OUTSIDE@/pwned']:
    try:
        open(path, 'a').write('pwned'); got.append(path)
    except OSError:
        pass
answer = repr(got) if got else 'contained'
""",
)
hostile(
    "double_fork_daemon",
    "persistence",
    """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(1); os.close(2)
        os.execv('/bin/sleep', ['sleep', '@TOKEN@'])
    os._exit(0)
time.sleep(0.2)
answer = 'contained'
""",
)
hostile(
    "nohup_child",
    "persistence",
    """
subprocess.Popen(['nohup', 'sleep', '@TOKEN@'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                 start_new_session=True)
time.sleep(0.2)
answer = 'contained'
""",
)
hostile(
    "setsid_children",
    "persistence",
    """
for _ in range(3):
    subprocess.Popen(['setsid', '-f', 'sleep', '@TOKEN@'], stderr=subprocess.DEVNULL)
    subprocess.Popen(['sh', '-c', 'trap "" HUP TERM; exec sleep @TOKEN@ & exit 0'])
time.sleep(0.3)
answer = 'contained'
""",
)
hostile(
    "delayed_writer",
    "persistence",
    """
if os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if os.fork() == 0:
        sys.argv[0] = 'sleep @TOKEN@'
        time.sleep(1.5)
        for path in ['@OUTSIDE@/late-@TOKEN@', '/tmp/late-@TOKEN@']:
            try:
                open(path, 'w').write('still here')
            except OSError:
                pass
        os.execv('/bin/sleep', ['sleep', '@TOKEN@'])
    os._exit(0)
answer = 'contained'
""",
)
hostile(
    "fork_bomb",
    "resources",
    """
n = 0
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3); os._exit(0)
    n += 1
answer = str(n)
""",
)
hostile(
    "memory_across_children",
    "resources",
    """
held, pipes = 0, []
for _ in range(8):
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(r)
        try:
            b = bytearray(@CHILD_MB@ * 1024 * 1024)
            for j in range(0, len(b), 4096):
                b[j] = 1
            time.sleep(2)  # all eight hold their memory at once (they start within milliseconds)
            os.write(w, b'1')
        except BaseException:
            pass
        os._exit(0)
    os.close(w); pipes.append((pid, r))
for pid, r in pipes:
    held += os.read(r, 1) == b'1'
    os.waitpid(pid, 0)
answer = str(held)
""",
)
FILL = """
def fill(folder, each, total):
    n = i = 0
    while n < total:
        try:
            with open(f'{folder}/fill-{os.getpid()}-{i}', 'wb') as f:
                f.write(b'x' * each)
        except OSError:
            break
        n += each; i += 1
    return n
"""
hostile(
    "fill_tmp_across_children",
    "resources",
    FILL
    + """
kids = []
for k in range(4):
    r, w = os.pipe()
    if os.fork() == 0:
        os.write(w, str(fill('/tmp', 1 << 20, 64 << 20)).encode()); os._exit(0)
    os.close(w); kids.append(r)
answer = str(sum(int(os.read(r, 64) or 0) for r in kids))
""",
)
hostile("fill_dev_shm", "resources", FILL + "answer = str(fill('/dev/shm', 1 << 20, 64 << 20))\n")
hostile(
    "fill_dev_and_root",
    "resources",
    FILL + "answer = str(sum(fill(d, 1 << 20, 64 << 20) for d in ('/dev', '/', '/proc', '/usr', '/lib')))\n",
)
hostile(
    "empty_files_flood",
    "resources",
    """
n = 0
try:
    while n < 300_000:
        os.close(os.open(f'/work/e{n}', os.O_CREAT | os.O_WRONLY)); n += 1
except OSError:
    pass
answer = str(n)
""",
)
hostile("many_small_files", "resources", FILL + "answer = str(fill('/work', 64 << 10, 64 << 20))\n")
hostile(
    "one_big_file",
    "resources",
    """
n = 0
try:
    with open('/work/big', 'wb') as f:
        while n < 100 << 20:
            f.write(b'x' * (1 << 20)); f.flush(); n += 1 << 20
except OSError:
    pass
answer = str(os.path.getsize('/work/big'))
""",
)
hostile(
    "cpu_across_children",
    "resources",
    """
for _ in range(6):
    if os.fork() == 0:
        os.setsid()
        sys.argv[0] = 'sleep @TOKEN@'
        while True:
            pass
while True:
    pass
""",
)
hostile(
    "deep_tree",
    "cleanup",
    """
os.chdir('/work')
for _ in range(10000):
    os.mkdir('d'); os.chdir('d')
open('leaf', 'w').write('x')
os.chdir('/work')
answer = 'contained'
""",
)
hostile(
    "links_and_stripped_dirs",
    "cleanup",
    """
os.makedirs('/work/a/b/c')
os.symlink('@SECRET@', '/work/a/b/c/secret-link')
os.symlink('@OUTSIDE@', '/work/a/b/outside-link')
os.symlink('/', '/work/a/root-link')
open('/work/a/b/c/f', 'w').write('x')
for p in ['/work/a/b/c/f', '/work/a/b/c', '/work/a/b', '/work/a']:
    os.chmod(p, 0)
answer = 'contained'
""",
)
hostile(
    "unreadable_files",
    "cleanup",
    """
for i in range(50):
    p = f'/work/u{i}'
    open(p, 'w').write('x'); os.chmod(p, 0)
os.mkdir('/work/locked'); open('/work/locked/f', 'w').write('x'); os.chmod('/work/locked', 0o100)
os.chmod('/work', 0o500)
answer = 'contained'
""",
)
hostile(
    "signal_the_parent",
    "interference",
    """
for pid in [os.getppid(), 1, -1, 0]:
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
answer = 'contained'
""",
)
hostile(
    "kill_other_processes",
    "interference",
    """
hit = []
for pid in @SLEEPERS@ + list(range(2, 2000)):
    try:
        os.kill(pid, signal.SIGKILL)
        if pid in @SLEEPERS@:
            hit.append(pid)
    except OSError:
        pass
try:
    os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)
except OSError:
    pass
answer = repr(hit) if hit else 'contained'
""",
)

# --- checks ----------------------------------------------------------------------------------------------


def _survivors(token: str) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmdline = Path(f"/proc/{d}/cmdline").read_bytes()
                state = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if token.encode() in cmdline and state != "Z":
                found.append(int(d))
    return found


def _traced(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    return re.search(r"TracerPid:\s+0\b", status) is None


def _sandbox_dirs(world: World) -> set[str]:
    return {p.name for p in world.scratch.glob("proctor-*")}


def _memory_bound_mb(r: SandboxResult) -> int:
    """What the run says it bounded the program's memory to."""
    if "no cgroup" not in r.enforced["memory"]:
        return LIMITS.memory_mb
    return LIMITS.memory_mb * (LIMITS.processes + 3)


def check(name: str, tier: str, r: SandboxResult) -> None:
    out = (r.answer or "") + r.stdout + r.stderr
    assert SECRET_TEXT not in out and USER_TEXT not in out, out
    assert set(r.enforced) == {"memory", "disk", "processes", "cpu", "wall"}
    assert r.wall_s < LIMITS.wall_seconds + 4, r
    klass = HOSTILE[name][0]
    if klass in ("escape", "exfiltration", "cleanup", "interference") or name == "double_fork_daemon":
        assert r.answer in ("contained", None), r  # None: the attempt itself crashed the program
    if name == "fork_bomb":
        assert r.ok and 1 <= int(r.answer or 0) <= 2 * LIMITS.processes, r
    if name == "memory_across_children":
        held = int(r.answer) if r.ok and r.answer else 0
        assert r.ok or r.cause in ("memory_limit", "killed", "error", "timeout"), r
        assert held * CHILD_MB <= _memory_bound_mb(r), (held, r.enforced)
    if name == "fill_dev_and_root":
        assert r.ok and r.answer == "0", r  # nothing is writable but the sized places
    if name in ("fill_tmp_across_children", "fill_dev_shm", "many_small_files"):
        assert r.ok and int(r.answer or 0) <= LIMITS.disk_mb << 20, r
    if name == "empty_files_flood":  # bounded by inodes (unshare), else by CPU, wall and the cgroup
        assert r.ok or r.cause in ("cpu_limit", "timeout", "memory_limit", "killed"), r
        if tier == "unshare":
            assert int(r.answer or 0) <= max(1024, (LIMITS.disk_mb << 20) // 4096), r
    if name == "one_big_file":
        assert r.ok and int(r.answer or 0) <= LIMITS.file_size_mb << 20, r
    if name == "cpu_across_children":
        assert r.cause in ("cpu_limit", "timeout", "killed"), r


def run_case(name: str, tier: str, who: str, world: World, runner: UserRunner | None) -> None:
    token = f"{30 + random.random():.9f}"
    code = HOSTILE[name][1]
    for key, value in world.values(token).items():
        code = code.replace(f"@{key}@", value)
    secret_mode = world.secret.stat().st_mode
    home_before = world.home_file.read_text()
    before = set(os.listdir(world.outside)), _sandbox_dirs(world)
    if who == "user" and ROOT:
        if runner is None:
            pytest.skip("no ordinary user to become (no useradd)")
        if tier in runner.unavailable:
            pytest.skip(
                f"the {tier} tier is unavailable to an ordinary user here: {runner.unavailable[tier]}"
            )
        got = runner.run(code, tier, allow_unsafe=False)
    else:
        import asyncio

        from proctor.agents.sandbox import run_program

        got = asyncio.run(run_program(code, limits=LIMITS, tier=tier))  # type: ignore[arg-type]
    if isinstance(got, str):  # refused: contained by not running
        assert "bubblewrap" in got
        return
    deadline = time.monotonic() + 2.0
    while _survivors(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _survivors(token) == [], f"{name}: processes outlived the call"
    if name == "delayed_writer":
        time.sleep(1.6)  # what it would have written by now
    check(name, tier, got)
    # the host, untouched
    assert world.secret.stat().st_mode == secret_mode and world.secret.read_text() == SECRET_TEXT
    assert world.home_file.read_text() == home_before
    assert set(os.listdir(world.outside)) == before[0], "a file appeared in the world-writable folder"
    assert not list(Path(world.home_file.parent).glob("pwned*"))
    assert not list(Path("/tmp").glob(f"*{token}*"))
    assert world.unix.accepted == world.abstract.accepted == world.tcp.accepted == 0
    assert b"HOSTILE" not in world.terminal_output()
    for p in world.sleepers.values():
        assert p.poll() is None and not _traced(p.pid), "a host process was killed or traced"
    assert _sandbox_dirs(world) <= before[1], "the run's folder was left behind"


@pytest.mark.parametrize("who", ["root", "user"])
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_program_is_contained(
    name: str, tier: str, who: str, world: World, user_runner: UserRunner | None
) -> None:
    if who == "root" and not ROOT:
        pytest.skip("not running as root (this process is the ordinary user's run)")
    run_case(name, tier, who, world, user_runner)


def test_the_suite_covers_every_class() -> None:
    classes = {k for k, _ in HOSTILE.values()}
    assert len(HOSTILE) >= 25
    assert classes == {"escape", "exfiltration", "persistence", "resources", "cleanup", "interference"}


# --- cleanup where the program writes the host's folder: the `none` tier --------------------------------


@pytest.mark.parametrize("name", ["deep_tree", "links_and_stripped_dirs", "unreadable_files"])
def test_cleanup_attacks_on_the_host_folder(name: str, world: World) -> None:
    """Unisolated (`sandbox: unsafe_local`), the program's folder is on the host: its removal must survive
    a deep tree, links out of it behind permission-stripped directories and unreadable files. The tree is
    2,000 deep here, past any recursion limit (the test below takes 10,000): this kernel makes each level
    of a deep tree cost time proportional to its depth."""
    import asyncio

    from proctor.agents.sandbox import run_program

    code = HOSTILE[name][1].replace("'/work", "'.").replace("os.chdir('.')", "os.chdir(_top)")
    code = code.replace("os.chdir('/work')", "os.chdir(_top)").replace("range(10000)", "range(2000)")
    code = "import os\n_top = os.getcwd()\n" + code
    for key, value in world.values("0").items():
        code = code.replace(f"@{key}@", value)
    secret_mode = world.secret.stat().st_mode
    before = _sandbox_dirs(world)
    r = asyncio.run(run_program(code, limits=LIMITS.model_copy(update={"wall_seconds": 30}), tier="none",
                                allow_unsafe=True))  # fmt: skip
    assert r.ok and r.answer == "contained", r
    assert _sandbox_dirs(world) <= before
    assert world.secret.stat().st_mode == secret_mode and stat.S_IMODE(secret_mode) == 0o644
    assert Path(world.outside).stat().st_mode & 0o777 == 0o777


def test_remove_tree_never_follows_links_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "host.txt"
    target.write_text("host")
    target.chmod(0o600)
    top = Path(tempfile.mkdtemp(dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    fd = os.open(top, os.O_RDONLY)
    for _ in range(10_000):  # deeper than any path or recursion limit
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.symlink(target, "link", dir_fd=fd)
    os.symlink(tmp_path, "dirlink", dir_fd=fd)
    os.chmod(fd, 0)
    os.close(fd)
    (top / "toplink").symlink_to(target)
    top.chmod(0o500)
    assert remove_tree(str(top)) is True and not top.exists(), caplog.text
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and tmp_path.stat().st_mode & 0o777 != 0
    assert remove_tree(str(top)) is True  # already gone: still no error
    assert remove_tree("/proc/self/no/such/place") is True


def test_a_tier_that_cannot_isolate_is_refused_naming_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from proctor.agents import sandbox
    from proctor.errors import UserError

    broken = sandbox.TierProbe(
        tier="bubblewrap", python=PROBE.python, unavailable={"unshare": "pivot_root: operation not permitted"}
    )
    monkeypatch.setattr(sandbox, "probe_tier", lambda: broken)
    with pytest.raises(UserError, match="Install bubblewrap") as e:
        asyncio.run(sandbox.run_program("answer = 1", tier="unshare"))
    assert "pivot_root" in str(e.value)


def test_where_bubblewrap_works_the_unshare_tier_works_too() -> None:
    """Both need the same kernel features (user, mount and pid namespaces); a regression in the unshare
    tier's root set-up must not pass as "unavailable on this machine"."""
    tools = ("unshare", "setpriv", "pivot_root", "mount")
    missing = [t for t in tools if shutil.which(t, path="/usr/sbin:/usr/bin") is None]
    if "bubblewrap" in PROBE.unavailable or missing:
        pytest.skip(f"bubblewrap or util-linux missing: {PROBE.unavailable}")
    assert "unshare" not in PROBE.unavailable, PROBE.unavailable["unshare"]
