#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: only python3 (3.9+) is needed.
# Makes .venv once, installs the package with its test extra, and runs pytest
# against the Redis at $REDIS_URL (default redis://127.0.0.1:6379), or an
# embedded redis-server when nothing answers there.
set -euo pipefail
. "$(dirname "$0")/venv.sh"
install_into_venv test
exec .venv/bin/python -m pytest "$@"
