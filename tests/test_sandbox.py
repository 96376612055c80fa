"""The sandbox for model-written programs, with hostile programs: each is contained, ends with its cause,
and the test process carries on. Run under the strongest tier the machine has (bubblewrap on this
project's machines: install.sh installs it) and, where available, under `unshare` too."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from proctor.agents.sandbox import SandboxLimits, SandboxResult, TierProbe, probe_tier, run_program
from proctor.agents.tools import Toolbox, tool
from proctor.errors import UserError

PROBE = probe_tier()
TIERS = [
    t
    for t in ("bubblewrap", "unshare")
    if t == PROBE.tier or (t == "unshare" and "unshare" not in PROBE.unavailable)
]
pytestmark = pytest.mark.skipif(
    PROBE.tier == "none", reason=f"no sandbox tier on this machine: {PROBE.unavailable}"
)
LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=6, memory_mb=256, processes=8)


def lookup(entity: str) -> str:
    """Look an entity up."""
    if entity == "explode":
        raise RuntimeError("the database is on fire")
    return f"{entity} was founded in 1862"


def run(code: str, tier: str, **kw: object) -> SandboxResult:
    return asyncio.run(run_program(code, toolbox=Toolbox([tool(lookup)]), limits=LIMITS, tier=tier, **kw))  # type: ignore[arg-type]


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_tools_are_proxied_and_answer_returned(tier: str) -> None:
    r = run(
        "year = lookup('Ambry Glassworks').split()[-1]\n"
        "try:\n    lookup('explode')\nexcept ToolError as e:\n    err = str(e)\n"
        "try:\n    lookup(place='x')\nexcept ToolError as e:\n    bad = str(e)\n"
        "answer = f'{year}|{err}|{bad}'",
        tier,
    )
    assert r.cause == "finished" and r.tier == tier
    year, err, bad = (r.answer or "").split("|")
    assert year == "1862"
    assert err == "tool_exception: RuntimeError: the database is on fire"
    assert bad.startswith("invalid_arguments") and "Expected lookup(entity: str)" in bad
    assert [c.name for c in r.tool_calls] == ["lookup"] * 3 and r.tool_calls[0].arguments == {
        "entity": "Ambry Glassworks"
    }


def test_printed_result_is_the_answer_without_a_global(tier: str) -> None:
    r = run("print(6 * 7)", tier)
    assert r.cause == "finished" and r.answer == "42"


def test_infinite_loop_hits_the_cpu_limit(tier: str) -> None:
    r = run("while True:\n    pass", tier)
    assert r.cause == "cpu_limit" and r.answer is None  # killed by RLIMIT_CPU, not the wall clock


def test_sleeping_program_is_killed_at_the_wall_clock(tier: str) -> None:
    r = run("import time\ntime.sleep(60)", tier)
    assert r.cause == "timeout" and r.answer is None


def test_memory_bomb(tier: str) -> None:
    r = run("blob = bytearray(2_000_000_000)\nanswer = 'allocated'", tier)
    assert r.cause == "memory_limit" and r.answer is None


def test_fork_bomb_is_contained(tier: str) -> None:
    r = run(
        "import os, time\nn = 0\nfor _ in range(500):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    n += 1\n"
        "answer = str(n)",
        tier,
    )
    assert r.cause == "finished" and int(r.answer or "0") <= LIMITS.processes
    assert len(os.listdir("/proc")) > 0  # and this process is well


def test_write_outside_the_work_dir_fails(tier: str, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    r = run(f"open({str(target)!r}, 'w').write('pwned')\nanswer = 'wrote'", tier)
    assert r.cause == "error" and not target.exists()


def test_planted_secret_cannot_be_read(tier: str, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("sk-planted-secret")
    secret.chmod(stat.S_IRUSR | stat.S_IWUSR)
    r = run(f"answer = open({str(secret)!r}).read()", tier)
    assert r.cause == "error" and "sk-planted-secret" not in (r.answer or "") + r.stdout + r.stderr


def test_no_network_even_to_loopback(tier: str) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []
    server.settimeout(5)
    thread = threading.Thread(target=lambda: accepted.append(_accept(server)), daemon=True)
    thread.start()
    r = run(
        f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "answer = 'connected'",
        tier,
    )
    thread.join(6)
    server.close()
    assert r.cause == "error" and accepted == [None]


def _accept(server: socket.socket) -> object:
    try:
        conn, _ = server.accept()
    except OSError:
        return None
    conn.close()
    return "connected"


def test_shell_and_ctypes_stay_inside(tier: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    r = run(
        "import subprocess, ctypes, ctypes.util\n"
        f"subprocess.run(['sh', '-c', 'touch {marker}; echo hi > /work/inside.txt'])\n"
        "libc = ctypes.CDLL(ctypes.util.find_library('c'))\n"
        f"libc.system(b'touch {marker}2')\n"
        "import os\n"
        "answer = open('/work/inside.txt').read().strip() if os.path.exists('/work/inside.txt') else 'none'",
        tier,
    )
    assert r.cause == "finished"
    assert not marker.exists() and not Path(f"{marker}2").exists()


def test_environment_holds_no_secrets(tier: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    r = run("import os\nanswer = repr(dict(os.environ))", tier)
    assert r.cause == "finished" and "sk-parent-secret" not in (r.answer or "")


def test_no_isolation_refuses_unless_unsafe(monkeypatch: pytest.MonkeyPatch) -> None:
    import proctor.agents.sandbox as sb

    none = TierProbe(tier="none", python=PROBE.python, unavailable={"bubblewrap": "not installed"})
    monkeypatch.setattr(sb, "probe_tier", lambda: none)
    with pytest.raises(UserError, match="sandbox: unsafe_local"):
        asyncio.run(run_program("answer = 1"))
    r = asyncio.run(run_program("answer = 40 + 2", allow_unsafe=True, limits=LIMITS))
    assert r.cause == "finished" and r.answer == "42" and r.tier == "none"
