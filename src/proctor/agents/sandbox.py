"""A sandbox for model-written programs (PAL): never run generated code anywhere else.

A program runs in a subprocess with resource limits (CPU seconds, address space, file size, open files,
processes), a fresh temporary directory as its only writable place, an empty environment (no API keys), no
network, and a wall-clock kill of its whole process group. As root, the program runs as `nobody`, so the
process limit counts its own processes only (root is exempt from it). Isolation comes in tiers, probed once
and recorded in the run:

* `bubblewrap` — `bwrap --unshare-all --new-session --die-with-parent`: new user, pid, network, IPC and UTS
  namespaces; a read-only `/usr` (the system Python and its standard library), a private `/tmp`, the
  program's folder as `/work`; nothing else of the host's file system is visible.
* `unshare` — `unshare --net --map-root-user`: no network; the file system is the host's (read access as
  `nobody`; writes only where `nobody` may write).
* `none` — refused unless the config says `sandbox: unsafe_local`.

Tools reach the program as plain functions; each call is proxied over a pipe to the parent, which runs the
real tool (validated, recorded) and sends back its result — the program itself never touches the database,
the corpus files or the network. Its answer is the global `answer` if set, else what it printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from proctor.agents.tools import Toolbox, ToolCall
from proctor.errors import UserError

Tier = Literal["bubblewrap", "unshare", "none"]
Cause = Literal[
    "finished", "timeout", "cpu_limit", "memory_limit", "output_limit", "error", "killed", "refused"
]
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
_BOOT = Path(__file__).with_name("sandbox_boot.py")


class SandboxLimits(BaseModel):
    cpu_seconds: int = Field(10, ge=1)
    wall_seconds: float = Field(20.0, gt=0)
    memory_mb: int = Field(512, ge=64)
    file_size_mb: int = Field(16, ge=1)
    processes: int = Field(16, ge=1, description="processes the program may run at once (beyond its own)")
    open_files: int = Field(64, ge=16)
    output_chars: int = Field(20_000, ge=100)
    tool_calls: int = Field(50, ge=0)


class TierProbe(BaseModel):
    tier: Tier
    python: str
    unavailable: dict[str, str] = Field(default_factory=dict)  # tier -> why it could not be used


class SandboxResult(BaseModel):
    ok: bool
    cause: Cause
    answer: str | None = None
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    wall_s: float = 0.0
    tier: Tier


def _interpreter() -> str:
    """The system Python when there is one (it lives under /usr, which the bubblewrap tier shows, and
    `nobody` can run it), else this interpreter."""
    return SYSTEM_PYTHON if os.access(SYSTEM_PYTHON, os.X_OK) else sys.executable


def _bwrap_cmd(workdir: str, python: str) -> list[str]:
    cmd = [
        "bwrap", "--unshare-all", "--new-session", "--die-with-parent",
        "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        "--bind", workdir, "/work", "--chdir", "/work",
    ]  # fmt: skip
    for top in ("/bin", "/lib", "/lib64", "/lib32", "/sbin"):
        p = Path(top)
        if p.is_symlink():
            cmd += ["--symlink", os.readlink(p), top]
        elif p.is_dir():
            cmd += ["--ro-bind", top, top]
    if not python.startswith("/usr/"):
        prefix = str(Path(python).resolve().parent.parent)
        cmd += ["--ro-bind", prefix, prefix]
    return cmd


def _wrap(tier: Tier, workdir: str, python: str) -> list[str]:
    if tier == "bubblewrap":
        return _bwrap_cmd(workdir, python)
    if tier == "unshare":
        return ["unshare", "--net", "--map-root-user"]
    return []


def _drop_to_nobody() -> bool:
    return os.geteuid() == 0


def _preexec(limits: SandboxLimits) -> None:
    """In the child before exec: become `nobody` (when root) and set the resource limits."""
    os.setsid()
    if _drop_to_nobody():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb * mb, limits.file_size_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = limits.processes + _processes_of(os.getuid())
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _processes_of(uid: int) -> int:
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{d}").st_uid == uid:
                    n += 1
    return n


def _works(cmd: list[str], python: str) -> str | None:
    """None when `cmd python -c pass` runs as the sandbox would run it, else why not."""
    with tempfile.TemporaryDirectory(prefix="proctor-probe-") as tmp:
        if _drop_to_nobody():
            os.chown(tmp, NOBODY, NOBODY)
        full = [*cmd, python, "-I", "-c", "print('ok')"]
        if cmd and cmd[0] == "bwrap":
            full = [*_bwrap_cmd(tmp, python), python, "-I", "-c", "print('ok')"]
        try:
            out = subprocess.run(
                full, capture_output=True, text=True, timeout=20, env={"PATH": "/usr/bin:/bin"},
                preexec_fn=functools.partial(_preexec, SandboxLimits()), cwd=tmp,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as e:
            return f"{type(e).__name__}: {e}"
        if out.returncode != 0 or out.stdout.strip() != "ok":
            return f"exit {out.returncode}: {out.stderr.strip()[:200]}"
    return None


@functools.cache
def probe_tier() -> TierProbe:
    """The strongest isolation this machine has (cached per process), and why stronger ones are missing."""
    python = _interpreter()
    why: dict[str, str] = {}
    if shutil.which("bwrap") is None:
        why["bubblewrap"] = (
            "bwrap is not installed (Debian: apt-get install bubblewrap; install.sh does it as root)"
        )
    elif (problem := _works(["bwrap"], python)) is not None:
        why["bubblewrap"] = problem
    else:
        return TierProbe(tier="bubblewrap", python=python, unavailable=why)
    if shutil.which("unshare") is None:
        why["unshare"] = "unshare is not installed"
    elif (problem := _works(["unshare", "--net", "--map-root-user"], python)) is not None:
        why["unshare"] = problem
    else:
        return TierProbe(tier="unshare", python=python, unavailable=why)
    return TierProbe(tier="none", python=python, unavailable=why)


def refuse_message(probe: TierProbe) -> str:
    reasons = "; ".join(f"{t}: {r}" for t, r in probe.unavailable.items())
    return (
        f"agent.sandbox: this machine offers no isolation for model-written programs ({reasons}). Install "
        f"bubblewrap (Debian: apt-get install bubblewrap), or set `sandbox: unsafe_local` in the agent's "
        f"config to run them as plain subprocesses at your own risk."
    )


async def run_program(
    code: str,
    *,
    toolbox: Toolbox | None = None,
    limits: SandboxLimits | None = None,
    tier: Tier | None = None,
    allow_unsafe: bool = False,
) -> SandboxResult:
    """Run `code` in the sandbox; tool calls are served from `toolbox`. Never raises for what the program
    does (its failures are the result's `cause`); raises UserError when no isolation is available and
    `allow_unsafe` is false."""
    limits = limits or SandboxLimits()
    probe = probe_tier()
    chosen: Tier = tier or probe.tier
    if chosen == "none" and not allow_unsafe:
        raise UserError(refuse_message(probe))
    tools = sorted(toolbox.tools) if toolbox is not None else []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="proctor-sandbox-") as tmp:
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        workdir = "/work" if chosen == "bubblewrap" else tmp
        Path(tmp, "program.py").write_text(code, encoding="utf-8")
        shutil.copy(_BOOT, Path(tmp, "boot.py"))
        if _drop_to_nobody():
            os.chown(tmp, NOBODY, NOBODY)
        argv = [
            *_wrap(chosen, tmp, probe.python), probe.python, "-I", "-S", f"{workdir}/boot.py",
            str(req_w), str(resp_r), json.dumps(tools), str(limits.tool_calls),
        ]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=tmp,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"},
            pass_fds=(req_w, resp_r),
            preexec_fn=functools.partial(_preexec, limits),
        )
        os.close(req_w)
        os.close(resp_r)
        calls: list[ToolCall] = []
        answer: list[str | None] = []
        overflow = False

        async def serve() -> None:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=1 << 20)
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(req_r, "rb", buffering=0)
            )
            out = os.fdopen(resp_w, "wb", buffering=0)
            try:
                while line := await reader.readline():
                    try:
                        msg = json.loads(line)
                    except json.JSONDecodeError:
                        break
                    if "answer" in msg:
                        answer.append(None if msg["answer"] is None else str(msg["answer"]))
                        continue
                    reply: dict[str, str | None]
                    if toolbox is None or len(calls) >= limits.tool_calls:
                        reply = {"error": "tool call limit reached" if toolbox else "no tools"}
                    else:
                        name, args = str(msg.get("tool")), msg.get("arguments") or {}
                        tool = toolbox.tools.get(name)
                        if isinstance(args, dict) and "__positional__" in args and tool is not None:
                            # f(x, y): positional arguments fill the parameters in order
                            params = list(tool.arguments.model_fields)
                            given = list(args.pop("__positional__"))
                            if len(given) > len(params):
                                args["__extra__"] = given[len(params) :]  # rejected by validation
                            args.update(zip(params, given, strict=False))
                        call = await toolbox.call(name, args)
                        calls.append(call)
                        reply = {"error": call.error} if call.error else {"result": call.result}
                    with contextlib.suppress(OSError):
                        out.write((json.dumps(reply) + "\n").encode())
            finally:
                transport.close()
                with contextlib.suppress(OSError):
                    out.close()

        async def read_capped(stream: asyncio.StreamReader) -> str:
            nonlocal overflow
            chunks: list[bytes] = []
            size = 0
            while data := await stream.read(65536):
                if size < limits.output_chars * 4:
                    chunks.append(data)
                size += len(data)
                if size > limits.output_chars * 4:
                    overflow = True
                    _kill(proc.pid)
            return b"".join(chunks).decode("utf-8", "replace")

        assert proc.stdout is not None and proc.stderr is not None
        server = asyncio.ensure_future(serve())
        readers = asyncio.gather(read_capped(proc.stdout), read_capped(proc.stderr))
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout=limits.wall_seconds)
        except TimeoutError:
            timed_out = True
            _kill(proc.pid)
            await proc.wait()
        stdout, stderr = await readers
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server, timeout=2)
        code_ = proc.returncode
    cause = _cause(code_, stderr, timed_out, overflow)
    text = answer[-1] if answer and answer[-1] is not None else stdout.strip() or None
    return SandboxResult(
        ok=cause == "finished",
        cause=cause,
        answer=(text[: limits.output_chars] if text else None) if cause == "finished" else None,
        stdout=stdout[: limits.output_chars],
        stderr=stderr[-limits.output_chars :],
        exit_code=code_,
        tool_calls=calls,
        wall_s=round(time.monotonic() - started, 3),
        tier=chosen,
    )


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _cause(code: int | None, stderr: str, timed_out: bool, overflow: bool) -> Cause:
    if timed_out:
        return "timeout"
    if overflow:
        return "output_limit"
    if code == 0:
        return "finished"
    sig = (
        -code if code is not None and code < 0 else (code - 128 if code is not None and code > 128 else None)
    )
    if sig in (signal.SIGXCPU, signal.SIGKILL) and "MemoryError" not in stderr:
        return "cpu_limit" if sig == signal.SIGXCPU or "CPU" in stderr else "killed"
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        return "memory_limit"
    return "error"
