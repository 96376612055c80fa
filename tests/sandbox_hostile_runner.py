"""Runs sandboxed programs as an ordinary user for tests/test_sandbox_hostile.py: started by the root test,
it imports everything, gives up root for the user's uid and gids for good (as `runuser -u USER` would; the
project's interpreter lives under /root, which another user cannot even start), then reads one JSON
request per line on stdin and writes each SandboxResult as one JSON line on stdout.

Request: {"code": str, "tier": str, "limits": {...}, "allow_unsafe": bool}; reply: a SandboxResult, or
{"refused": message} when the tier refuses to run for this user.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import sys

from proctor.agents import sandbox, sandbox_cgroup
from proctor.agents.sandbox import SandboxLimits, run_program
from proctor.errors import UserError


def _drop_to(user: str) -> None:
    entry = pwd.getpwnam(user)
    os.setgroups([])
    os.setresgid(entry.pw_gid, entry.pw_gid, entry.pw_gid)
    os.setresuid(entry.pw_uid, entry.pw_uid, entry.pw_uid)
    os.environ.update(HOME=entry.pw_dir, USER=user, LOGNAME=user)
    os.chdir(entry.pw_dir)
    assert os.geteuid() == entry.pw_uid and os.getuid() == entry.pw_uid


def main() -> None:
    # Load every module a run needs while the interpreter's files are still readable.
    asyncio.run(run_program("answer = 1", allow_unsafe=True))
    _drop_to(sys.argv[1])
    sandbox.probe_tier.cache_clear()  # probed again as the user: what the user's runs really get
    sandbox_cgroup.cgroup_base.cache_clear()
    probe = sandbox.probe_tier()
    print(json.dumps({"probe": probe.model_dump(), "uid": os.getuid()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            result = asyncio.run(
                run_program(
                    req["code"],
                    limits=SandboxLimits(**req["limits"]),
                    tier=req["tier"],
                    allow_unsafe=req.get("allow_unsafe", False),
                )
            )
        except UserError as e:  # the tier refused this user: a result of its own
            print(json.dumps({"refused": str(e)}), flush=True)
            continue
        print(result.model_dump_json(), flush=True)


if __name__ == "__main__":
    main()
