"""Runs inside the sandbox (copied beside the program): defines one function per tool, each proxied to the
parent over a pipe, runs `program.py`, and reports the global `answer`. Standard library only.

argv: request fd, response fd, JSON list of tool names, tool-call limit.
"""

import json
import os
import sys

_REQ = os.fdopen(int(sys.argv[1]), "w", buffering=1)
_RESP = os.fdopen(int(sys.argv[2]), "r")
_TOOLS = json.loads(sys.argv[3])


class ToolError(Exception):
    """A tool call failed; the message says why (invalid arguments, unknown tool, the tool's error)."""


def _call(name, args, kwargs):
    payload = dict(kwargs)
    if args:
        payload["__positional__"] = list(args)
    _REQ.write(json.dumps({"tool": name, "arguments": payload}) + "\n")
    line = _RESP.readline()
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


_globals = {"__name__": "__main__", "ToolError": ToolError}
for _name in _TOOLS:
    _globals[_name] = _make(_name)
with open("program.py", encoding="utf-8") as _f:
    _code = compile(_f.read(), "program.py", "exec")
exec(_code, _globals)
_answer = _globals.get("answer")
_REQ.write(json.dumps({"answer": None if _answer is None else str(_answer)}) + "\n")
