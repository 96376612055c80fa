"""Child process that serves one GGUF model with llama.cpp (xllamacpp) on 127.0.0.1.

    python -m proctor.models.local_server --model PATH --ctx N --parallel P --threads T [--log FILE]

Prints `{"address": "http://127.0.0.1:PORT"}` as one line on stdout once listening, then serves until
stdin closes (the parent exited or closed the pipe) or SIGTERM/SIGINT arrives. llama.cpp logs from C++,
so fd 1 and 2 are redirected to the log file at the OS level before the server is created; the address
line goes to a saved copy of the original stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from types import FrameType


def _redirect_output(log_path: str | None) -> int:
    """Point fds 1 and 2 at the log (or /dev/null); return a private fd for the original stdout."""
    out_fd = os.dup(1)
    target = os.open(log_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    sys.stdout = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)
    return out_fd


def _exit_now(code: int = 0) -> None:
    """Leave without running the server's destructors; the OS frees the model and the socket."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m proctor.models.local_server", description=__doc__)
    ap.add_argument("--model", required=True, help="path of the GGUF file")
    ap.add_argument("--ctx", type=int, default=8192, help="total context tokens (split across slots)")
    ap.add_argument("--parallel", type=int, default=2, help="number of parallel slots")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads")
    ap.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    ap.add_argument("--log", default=None, help="file for llama.cpp's log (default: discard)")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--no-prompt-cache", action="store_true", help="bit-identical logprobs, slower")
    args = ap.parse_args(argv)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        _exit_now(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    out_fd = _redirect_output(args.log)
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.warmup = not args.no_warmup
    params.cache_prompt = not args.no_prompt_cache
    try:
        server = xlc.Server(params)
    except Exception as e:  # surfaces in the log; the parent reports the log path
        print(f"proctor.local_server: failed to start: {type(e).__name__}: {e}", file=sys.stderr)
        _exit_now(1)
    address = str(server.listening_address)
    if not address.startswith("http"):
        address = f"http://{address}"
    os.write(out_fd, (json.dumps({"address": address}) + "\n").encode())
    os.close(out_fd)

    # Block until the parent closes our stdin (normal close, or the parent died).
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    _exit_now(0)


if __name__ == "__main__":
    main()
