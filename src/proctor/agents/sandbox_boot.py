"""Runs inside the sandbox, copied beside the program: defines one function per tool, each proxied to the
parent over a pipe, runs `program.py`, and reports the global `answer`. Standard library only, and nothing
here is trusted: the parent checks every message it gets.

argv[1] is a JSON object: `req` / `resp` (the pipe ends), `tools` (names), `max_request` (bytes of one
request line), `max_answer` (characters of the answer). Protocol, one JSON object per line:
program -> parent `{"tool": name, "kwargs": {...}, "args": [...]}` or `{"answer": text | null}`;
parent -> program `{"result": text}` or `{"error": text}`.
"""

import contextlib
import json
import os
import sys

_CONF = json.loads(sys.argv[1])


def _reap_as_pid_one():
    """As pid 1 of a fresh pid namespace (the `unshare` tier) the kernel ignores default-action signals
    such as SIGXCPU; so the program runs in a child, and this process only waits, reaps orphans and exits
    with the program's status (128 + signal when it was killed, as bubblewrap reports it). When it exits,
    the kernel kills whatever the program left behind in the namespace."""
    child = os.fork()
    if child == 0:
        return
    code = 1
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            break
    os._exit(128 - code if code < 0 else code)


if os.getpid() == 1:
    _reap_as_pid_one()

_REQ = os.fdopen(_CONF["req"], "w", buffering=1, encoding="utf-8")
_RESP = os.fdopen(_CONF["resp"], "r", encoding="utf-8")


class ToolError(Exception):
    """A tool call failed; the message says why (invalid arguments, unknown tool, the tool's error)."""


def _send(message):
    line = json.dumps(message, ensure_ascii=False)
    if len(line.encode("utf-8")) > _CONF["max_request"]:
        raise ToolError(f"tool request over {_CONF['max_request']} bytes: pass smaller arguments")
    try:
        _REQ.write(line + "\n")
    except (OSError, ValueError) as e:
        raise ToolError("the tool channel is closed") from e


def _call(name, args, kwargs):
    try:
        message = {"tool": name, "kwargs": dict(kwargs), "args": list(args)}
        json.dumps(message)
    except (TypeError, ValueError) as e:
        raise ToolError(f"tool arguments must be JSON values (str, number, bool, list, dict): {e}") from e
    _send(message)
    try:
        line = _RESP.readline()
    except (OSError, ValueError):
        line = ""
    if not line:
        raise ToolError("the tool channel is closed")
    reply = json.loads(line)
    if reply.get("error"):
        raise ToolError(reply["error"])
    result = reply.get("result")
    try:  # a tool that answers JSON gives the program a list or dict
        value = json.loads(result)
    except (TypeError, ValueError):
        return result
    return value if isinstance(value, (list, dict)) else result


def _make(name):
    def tool(*args, **kwargs):
        return _call(name, args, kwargs)

    tool.__name__ = name
    return tool


_globals = {"__name__": "__main__", "__builtins__": __builtins__, "ToolError": ToolError}
for _name in _CONF["tools"]:
    _globals[_name] = _make(_name)
with open("program.py", encoding="utf-8") as _f:
    _code = compile(_f.read(), "program.py", "exec")
exec(_code, _globals)
_answer = _globals.get("answer")
_answer = None if _answer is None else str(_answer)[: _CONF["max_answer"]]
with contextlib.suppress(OSError, ValueError):  # a closed channel: its printed output is the answer
    _REQ.write(json.dumps({"answer": _answer}) + "\n")
