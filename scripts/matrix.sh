#!/usr/bin/env bash
# The support matrix (noxfile.py): build and check the sdist and the wheel, then run the tests on
# every stack of the README's table against that wheel. `matrix.sh cells` runs the cells alone, on
# the wheel an earlier `matrix.sh -s package` built; other arguments go to nox as they are.
# The cells run in $MATRIX_LANES lanes at once (default 3: their tests mostly wait on workers and
# timers), each lane's output printed as it ends.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
fi
if [ ! -x .venv/bin/nox ]; then
    .venv/bin/python -m pip install --quiet "nox>=2024.4" || exit 1
fi
if [ "$#" -gt 0 ] && [ "$1" != "cells" ]; then
    exec .venv/bin/nox "$@"
fi

if [ "${1:-}" != "cells" ]; then
    .venv/bin/nox -s package || exit 1
fi
cells=$(.venv/bin/nox -l --json -t cells 2>/dev/null | .venv/bin/python -c '
import json, sys
print(" ".join(s["session"] for s in json.load(sys.stdin) if s["session"].startswith("cell-")))')
[ -n "$cells" ] || { echo "matrix: nox lists no cells" >&2; exit 1; }

lanes=${MATRIX_LANES:-3}
logs=$(mktemp -d)
pids=()
for ((lane = 0; lane < lanes; lane++)); do
    mine=()
    i=0
    for cell in $cells; do
        if (( i % lanes == lane )); then mine+=("$cell"); fi
        i=$((i + 1))
    done
    [ "${#mine[@]}" -gt 0 ] || continue
    .venv/bin/nox -s "${mine[@]}" >"$logs/$lane.log" 2>&1 &
    pids+=("$!:$lane")
done

rc=0
for entry in "${pids[@]}"; do
    pid=${entry%%:*}
    lane=${entry##*:}
    if ! wait "$pid"; then rc=1; fi
    cat "$logs/$lane.log"
done
rm -rf "$logs"
if [ "$rc" -ne 0 ]; then
    echo "matrix: at least one cell failed (see above)" >&2
fi
exit "$rc"
