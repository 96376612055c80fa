#!/usr/bin/env bash
# Create bench/.venv-irt with girth (unmaintained; needs numpy < 2) for bench/irt_recovery.py.
# It is a separate venv so that girth's numpy 1.x never meets proctor's numpy 2. Nothing in it is tracked.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="$here/.venv-irt"
python3 -m venv "$venv"
echo '*' > "$venv/.gitignore"
"$venv/bin/pip" install -q 'numpy<2' 'scipy<1.14' 'girth==0.8.0'
"$venv/bin/python" -c "import girth, numpy; print('girth ok, numpy', numpy.__version__)"
