#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: only python3 (3.9+) is needed.
# Makes .venv once, installs the package with its test extra, and runs pytest
# against the Redis at $REDIS_URL (default redis://127.0.0.1:6379), or an
# embedded redis-server when nothing answers there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet -e '.[test]'
exec .venv/bin/python -m pytest "$@"
