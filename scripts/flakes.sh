#!/usr/bin/env bash
# The flake finder: run a tier of the tests several times over and list every test that failed in
# any run, with how often. A test that fails once in five is a test that will fail a CI run.
#
#   bash scripts/flakes.sh                      the real-worker tier (tests/integration), 5 runs
#   bash scripts/flakes.sh -n 10 tests/integration/test_limits.py -k window
#   bash scripts/flakes.sh --stress             the same while one core is kept busy (--stress=N: N)
#   bash scripts/flakes.sh -j 2                 two runs at once (each run's tests start their own
#                                               servers and workers, so runs share nothing)
#
# Exits 0 only when every run ran tests and none failed. Each run's output is kept in a folder
# whose name is printed at the end.
set -uo pipefail
. "$(dirname "$0")/venv.sh"
. "$(dirname "$0")/load.sh"

runs=5
lanes=1
busy=0
args=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        -n) runs=$2; shift ;;
        -n*) runs=${1#-n} ;;
        -j) lanes=$2; shift ;;
        -j*) lanes=${1#-j} ;;
        --stress) busy=1 ;;
        --stress=*) busy=${1#--stress=} ;;
        *) args+=("$1") ;;
    esac
    shift
done
case "$runs" in '' | *[!0-9]* | 0) echo "-n takes a number of runs above 0, not '$runs'" >&2; exit 2 ;; esac
case "$lanes" in '' | *[!0-9]* | 0) echo "-j takes a number of runs at once above 0, not '$lanes'" >&2; exit 2 ;; esac
[ "${#args[@]}" -gt 0 ] || args=(tests/integration)

install_into_venv test
if [ "$busy" != 0 ]; then
    keep_cores_busy "$busy" || exit 2
fi
logs=$(mktemp -d "${TMPDIR:-/tmp}/csl-flakes.XXXXXX")
one_run() {
    local run=$1 start=$SECONDS rc
    .venv/bin/python -m pytest -p no:cacheprovider -q -rfE "${args[@]}" >"$logs/run-$run.log" 2>&1
    rc=$?
    echo "$rc" >"$logs/run-$run.rc"
    echo "run $run of $runs: rc $rc in $((SECONDS - start)) s: $(tail -n 1 "$logs/run-$run.log")"
}
running=()
for ((run = 1; run <= runs; run++)); do
    while [ "${#running[@]}" -ge "$lanes" ]; do  # a lane frees when its run ends
        sleep 2
        alive=()
        for pid in "${running[@]}"; do
            if kill -0 "$pid" 2>/dev/null; then alive+=("$pid"); fi
        done
        running=(${alive[@]+"${alive[@]}"})
    done
    one_run "$run" &
    running+=("$!")
done
wait ${running[@]+"${running[@]}"}
bad=0
for ((run = 1; run <= runs; run++)); do
    if [ "$(cat "$logs/run-$run.rc" 2>/dev/null)" != 0 ]; then bad=1; fi
done

failed=$(grep -hE '^(FAILED|ERROR) ' "$logs"/run-*.log | sed -E 's/^(FAILED|ERROR) ([^ ]+).*/\2/' | sort | uniq -c | sort -rn)
if [ -n "$failed" ]; then
    echo "failed at least once (runs failed, test):"
    echo "$failed"
else
    echo "no test failed in $runs runs"
fi
echo "the runs' output: $logs"
exit "$bad"
