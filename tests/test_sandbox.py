"""The sandbox for model-written programs, with hostile programs: each is contained, ends with its cause,
and the test process carries on. Run under every tier the machine has (bubblewrap on this project's
machines: install.sh installs it; `unshare` too where it works), and the basic ones under `none` with
`allow_unsafe`. Every containment test plants something the program could reach *if* the isolation it
tests were missing (a world-readable secret, a world-writable directory, a listening socket), so it fails
when containment breaks rather than passing on file permissions alone."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.agents.sandbox import (
    SandboxLimits,
    SandboxResult,
    Tier,
    TierProbe,
    probe_tier,
    run_program,
)
from proctor.agents.tools import Toolbox, tool
from proctor.errors import UserError

PROBE = probe_tier()
TIERS: list[Tier] = [t for t in ("bubblewrap", "unshare") if t not in PROBE.unavailable]
ROOT = os.geteuid() == 0
LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=8, memory_mb=256, processes=8)
pytestmark = pytest.mark.skipif(not TIERS, reason=f"no sandbox tier on this machine: {PROBE.unavailable}")


def lookup(entity: str) -> str:
    """Look an entity up."""
    if entity == "explode":
        raise RuntimeError("the database is on fire")
    return f"{entity} was founded in 1862"


def population(city: str, year: int = 2020) -> dict[str, Any]:
    """Population of a city."""
    return {"city": city, "year": year, "people": 41_000}


def run(code: str, tier: Tier, limits: SandboxLimits = LIMITS, **kw: Any) -> SandboxResult:
    box = Toolbox([tool(lookup), tool(population)])
    return asyncio.run(run_program(code, toolbox=box, limits=limits, tier=tier, **kw))


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> Tier:
    return request.param


@pytest.fixture(params=[*TIERS, "none"])
def any_tier(request: pytest.FixtureRequest) -> Tier:
    """The tiers plus `none` (plain subprocess, allowed explicitly): for what every tier must do."""
    return request.param


def _token() -> str:
    """A unique `sleep` argument: a process carrying it in its command line is one this test started."""
    return f"{30 + random.random():.9f}"


def _processes_with(token: str) -> list[int]:
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


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the sandbox that only isolation keeps the program out of: world-writable with a
    world-readable secret under bubblewrap (which must hide it); root-owned and private under the other
    tiers, which show the host's files and rely on the program's own uid."""
    d = Path(
        tempfile.mkdtemp(prefix="proctor-outside-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None)
    )
    secret = d / "secret.txt"
    secret.write_text("sk-planted-secret")
    yield d
    for p in d.iterdir():
        p.unlink()
    d.rmdir()


def _expose(d: Path, tier: str) -> None:
    if tier == "bubblewrap":
        d.chmod(0o777)
        (d / "secret.txt").chmod(0o644)
    else:
        d.chmod(0o755)
        (d / "secret.txt").chmod(0o600)


# --- tools and answers -----------------------------------------------------------------------------------


def test_tools_are_proxied_and_their_failures_become_messages(any_tier: Tier) -> None:
    r = run(
        "year = lookup('Ambry Glassworks').split()[-1]\n"
        "people = population('Ambry', year=int(year))['people']\n"
        "msgs = []\n"
        "for call in (lambda: lookup('explode'), lambda: lookup(place='x'), lambda: lookup(1, 2),\n"
        "             lambda: lookup({1, 2})):\n"
        "    try:\n        call()\n    except ToolError as e:\n        msgs.append(str(e))\n"
        "answer = '|'.join([year, str(people), *msgs])",
        any_tier,
        allow_unsafe=True,
    )
    assert r.cause == "finished" and r.tier == any_tier, r.stderr
    year, people, boom, bad_kw, bad_pos, not_json = (r.answer or "").split("|")
    assert (year, people) == ("1862", "41000")
    assert boom == "tool_exception: RuntimeError: the database is on fire"
    assert bad_kw.startswith("invalid_arguments") and "Expected lookup(entity: str)" in bad_kw
    assert bad_pos.startswith("invalid_arguments") and "__extra__" in bad_pos
    assert not_json.startswith("tool arguments must be JSON values")  # refused inside, never sent
    assert [c.name for c in r.tool_calls] == ["lookup", "population", "lookup", "lookup", "lookup"]
    assert r.tool_calls[1].arguments == {"city": "Ambry", "year": 1862}
    assert r.tool_calls[0].latency_s >= 0 and r.tool_calls[2].error and r.tool_calls[0].error is None


def test_plain_functions_as_tools_and_the_call_cap(tier: Tier) -> None:
    r = asyncio.run(
        run_program(
            "out = []\nfor i in range(5):\n    try:\n        out.append(str(double(i)))\n"
            "    except ToolError as e:\n        out.append(str(e))\nanswer = ';'.join(out)",
            tools={"double": lambda x: 2 * x},
            limits=LIMITS.model_copy(update={"tool_calls": 3}),
            tier=tier,
        )
    )
    parts = (r.answer or "").split(";")
    assert r.cause == "finished" and parts[:3] == ["0", "2", "4"]
    assert parts[3] == parts[4] == "tool_limit: at most 3 tool calls per program"
    assert len(r.tool_calls) == 3


def test_printed_result_is_the_answer_without_a_global(any_tier: Tier) -> None:
    r = run("print(6 * 7)", any_tier, allow_unsafe=True)
    assert r.cause == "finished" and r.ok and r.answer == "42" and r.exit_code == 0


def test_an_exception_in_the_program_is_an_error_with_its_traceback(any_tier: Tier) -> None:
    r = run("answer = [1][5]", any_tier, allow_unsafe=True)
    assert r.cause == "error" and not r.ok and r.answer is None
    assert r.stderr.strip().splitlines()[-1] == "IndexError: list index out of range"


def test_hostile_tool_channel_traffic_gets_errors_and_never_blocks_the_parent(tier: Tier) -> None:
    fd = "__import__('json').loads(__import__('sys').argv[1])['req']"
    resp = "__import__('json').loads(__import__('sys').argv[1])['resp']"
    r = run(
        f"import os\nw, r = {fd}, open({resp})\n"
        "os.write(w, b'not json\\n[1, 2]\\n{\"tool\": 5}\\n')\n"
        "answer = '|'.join(r.readline().strip() for _ in range(3))",
        tier,
    )
    assert r.cause == "finished"
    assert "invalid_request: not a JSON line" in (r.answer or "") and "no tool name" in (r.answer or "")
    # Requests without ever reading a reply, then a sleep: the parent stops serving instead of blocking
    # its event loop on a full pipe, and the wall clock still ends the program.
    started = time.monotonic()
    r = run(
        f'import os, time\nfor _ in range(20000):\n    os.write({fd}, b\'{{"tool": "lookup"}}\\n\')\n'
        "time.sleep(30)",
        tier,
        limits=LIMITS.model_copy(update={"wall_seconds": 3}),
    )
    assert r.cause in ("error", "timeout") and time.monotonic() - started < 8
    assert len(r.tool_calls) <= LIMITS.tool_calls


# --- limits ----------------------------------------------------------------------------------------------


def test_infinite_loop_hits_the_cpu_limit(any_tier: Tier) -> None:
    limits = LIMITS.model_copy(update={"cpu_seconds": 1, "wall_seconds": 20})
    r = run("while True:\n    pass", any_tier, limits=limits, allow_unsafe=True)
    assert r.cause == "cpu_limit" and r.signal == signal.SIGXCPU and r.answer is None
    assert r.wall_s < 15


def test_sleeping_program_is_killed_at_the_wall_clock(any_tier: Tier) -> None:
    limits = LIMITS.model_copy(update={"wall_seconds": 2})
    r = run("import time\ntime.sleep(60)", any_tier, limits=limits, allow_unsafe=True)
    assert r.cause == "timeout" and r.wall_s < 2 + 3


def test_memory_bomb(tier: Tier) -> None:
    r = run("blob = bytearray(2_000_000_000)\nanswer = 'allocated'", tier)
    assert r.cause == "memory_limit" and r.answer is None
    r = run("chunks = []\nwhile True:\n    chunks.append(bytearray(50_000_000))", tier)
    assert r.cause == "memory_limit"


def test_output_flood_is_cut(tier: Tier) -> None:
    r = run("while True:\n    print('x' * 10_000)", tier)
    assert r.cause == "output_limit" and len(r.stdout) <= LIMITS.output_chars


@pytest.mark.skipif(not ROOT, reason="as a normal user the process limit counts all of the user's processes")
def test_fork_bomb_is_contained(tier: Tier) -> None:
    # Bounded so that a broken limit cannot hurt the machine: at most 300 children, each gone in 3 s.
    r = run(
        "import os, time\nn = 0\nfor _ in range(300):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n    n += 1\n"
        "answer = str(n)",
        tier,
    )
    # Contained: forking stops after a handful, far from the 300 tried. Not exactly at the limit: in the
    # unshare tier the kernel counts processes per user namespace (ucounts), and a CI run once got 10 with
    # a limit of 8.
    assert r.cause == "finished" and 1 <= int(r.answer or "0") <= 2 * LIMITS.processes
    assert subprocess.run(["true"]).returncode == 0  # this machine still starts processes


def test_nothing_outlives_the_run(any_tier: Tier) -> None:
    if any_tier == "none" and not ROOT:
        pytest.skip("without namespaces and a uid of its own, a new session escapes the process group")
    token = _token()
    r = run(
        "import os\nif os.fork() == 0:\n    os.setsid()\n    os.close(1)\n    os.close(2)\n"
        f"    os.execv('/bin/sleep', ['sleep', '{token}'])\nanswer = 'left a daemon'",
        any_tier,
        allow_unsafe=True,
    )
    assert r.cause == "finished" and r.wall_s < 4
    time.sleep(0.3)
    assert _processes_with(token) == []


def test_a_cancelled_run_takes_its_program_down(tier: Tier) -> None:
    token = _token()

    async def cancelled() -> None:
        code = f"import os\nos.execv('/bin/sleep', ['sleep', '{token}'])"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run_program(code, limits=LIMITS, tier=tier), 1.0)

    asyncio.run(cancelled())
    time.sleep(0.3)
    assert _processes_with(token) == []


# --- isolation -------------------------------------------------------------------------------------------


def test_write_outside_the_work_dir_fails(tier: Tier, outside: Path) -> None:
    if tier != "bubblewrap" and not ROOT:
        pytest.skip("the unshare tier shows the host's files: only a uid of its own (as root) protects them")
    _expose(outside, tier)
    target = outside / "pwned.txt"
    r = run(
        f"open('inside.txt', 'w').write('fine')\nopen({str(target)!r}, 'w').write('pwned')\nanswer = 'wrote'",
        tier,
    )
    assert r.cause == "error" and not target.exists()
    assert r.stderr.strip().splitlines()[-1].startswith(("FileNotFoundError", "PermissionError"))


def test_planted_secret_cannot_be_read(tier: Tier, outside: Path) -> None:
    if tier != "bubblewrap" and not ROOT:
        pytest.skip("the unshare tier shows the host's files: only a uid of its own (as root) protects them")
    _expose(outside, tier)
    r = run(f"answer = open({str(outside / 'secret.txt')!r}).read()", tier)
    assert r.cause == "error" and "sk-planted-secret" not in (r.answer or "") + r.stdout + r.stderr


def test_bubblewrap_shows_exactly_the_system_python() -> None:
    """What a program sees under bubblewrap, listed: the read-only system, its own /work, nothing else."""
    if "bubblewrap" not in TIERS:
        pytest.skip("no bubblewrap here")
    repo = Path(__file__).resolve().parents[1]
    r = run(
        "import os\nfacts = [sorted(os.listdir('/')), sorted(os.listdir('/work')), os.listdir('/tmp'),\n"
        f" os.path.exists({str(repo)!r}), os.path.exists('/etc/passwd'), os.path.exists('/root'),\n"
        " sorted(p for p in os.listdir('/proc') if p.isdigit())]\n"
        "try:\n    open('/usr/pwned', 'w')\nexcept OSError as e:\n    facts.append(type(e).__name__)\n"
        "import json\nanswer = json.dumps(facts)",
        "bubblewrap",
    )
    tops = sorted(
        t
        for t in ("bin", "lib", "lib32", "lib64", "sbin")
        if Path("/" + t).exists() or Path("/" + t).is_symlink()
    )
    expected = [
        sorted([*tops, "dev", "proc", "tmp", "usr", "work"]),
        ["boot.py", "program.py"],
        [],
        False,
        False,
        False,
        ["1", "2"],  # bubblewrap's init and the program: no host process is visible
        "PermissionError" if ROOT else "OSError",
    ]
    got = json.loads(r.answer or "null")
    assert r.cause == "finished" and got[:7] == expected[:7]
    assert got[7] in ("PermissionError", "OSError")


def test_no_network_even_to_loopback(any_tier: Tier) -> None:
    if any_tier == "none":
        pytest.skip("no network namespace without a tier")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # bound to the network namespace too
    name = f"\0proctor-test-{os.getpid()}-{random.random()}"
    abstract.bind(name)
    abstract.listen(1)
    try:
        r = run(
            "import socket\nout = []\n"
            f"for family, addr in ((socket.AF_INET, ('127.0.0.1', {port})), (socket.AF_UNIX, {name!r})):\n"
            "    s = socket.socket(family, socket.SOCK_STREAM)\n    s.settimeout(2)\n"
            "    try:\n        s.connect(addr)\n        out.append('connected')\n"
            "    except OSError as e:\n        out.append(type(e).__name__)\n"
            "answer = ','.join(out)",
            any_tier,
        )
        for srv in (server, abstract):
            srv.setblocking(False)
            with pytest.raises(BlockingIOError):  # nobody knocked
                srv.accept()
    finally:
        server.close()
        abstract.close()
    assert r.cause == "finished" and "connected" not in (r.answer or ""), r.answer


def test_shell_and_ctypes_stay_inside(tier: Tier, outside: Path) -> None:
    if tier != "bubblewrap" and not ROOT:
        pytest.skip("the unshare tier shows the host's files: only a uid of its own (as root) protects them")
    _expose(outside, tier)
    secret, marker = outside / "secret.txt", outside / "marker"
    r = run(
        "import subprocess, ctypes, ctypes.util, os\n"
        f"shell = subprocess.run(['sh', '-c', 'cat {secret}; touch {marker}; echo hi > shell.txt'],\n"
        "                       capture_output=True, text=True)\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
        f"libc.system(b'touch {marker}2; cat {secret} > copied.txt; echo hi > system.txt')\n"
        "libc.setuid(0)\n"
        f"try:\n    stolen = open({str(secret)!r}).read()\n"
        "except OSError as e:\n    stolen = type(e).__name__\n"
        "answer = '|'.join([open('shell.txt').read().strip(), open('system.txt').read().strip(),\n"
        "                   shell.stdout, open('copied.txt').read(), stolen])",
        tier,
    )
    assert r.cause == "finished", r.stderr
    shell_ran, system_ran, shell_cat, system_cat, stolen = (r.answer or "").split("|")
    assert (shell_ran, system_ran) == ("hi", "hi")  # both really ran, inside
    assert "sk-planted" not in shell_cat + system_cat + stolen
    assert not marker.exists() and not Path(f"{marker}2").exists()


def test_ctypes_memory_writes_crash_only_the_program(any_tier: Tier) -> None:
    r = run("import ctypes\nctypes.memset(8, 1, 64)\nanswer = 'survived'", any_tier, allow_unsafe=True)
    assert r.cause == "error" and r.signal == signal.SIGSEGV and r.answer is None
    assert run("answer = 'next'", any_tier, allow_unsafe=True).answer == "next"  # and the run goes on


def test_environment_holds_no_secrets(any_tier: Tier, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("PROCTOR_TEST_TOKEN", "sk-parent-token")
    r = run(
        "import os\nseen = [repr(dict(os.environ)), open('/proc/self/environ').read()]\n"
        f"try:\n    seen.append(open('/proc/{os.getpid()}/environ').read())\n"
        "except OSError as e:\n    seen.append(type(e).__name__)\n"
        "answer = '|'.join(seen)",
        any_tier,
        allow_unsafe=True,
    )
    assert r.cause == "finished" and "sk-parent" not in (r.answer or "")
    assert "OPENAI" not in (r.answer or "") and "PATH" in (r.answer or "")


# --- tiers -----------------------------------------------------------------------------------------------


def test_no_isolation_refuses_unless_unsafe(monkeypatch: pytest.MonkeyPatch) -> None:
    import proctor.agents.sandbox as sb

    none = TierProbe(tier="none", python=PROBE.python, unavailable={"bubblewrap": "not installed"})
    monkeypatch.setattr(sb, "probe_tier", lambda: none)
    with pytest.raises(UserError, match="sandbox: unsafe_local") as e:
        asyncio.run(run_program("answer = 1"))
    assert "bubblewrap" in str(e.value)
    r = asyncio.run(run_program("answer = 40 + 2", allow_unsafe=True, limits=LIMITS))
    assert r.cause == "finished" and r.answer == "42" and r.tier == "none"


def test_the_probe_says_what_it_found() -> None:
    assert PROBE.tier in ("bubblewrap", "unshare", "none")
    assert all(t in ("bubblewrap", "unshare") and why for t, why in PROBE.unavailable.items())
    if "unshare" not in PROBE.unavailable:
        assert PROBE.unshare_args[0] == "--net"
