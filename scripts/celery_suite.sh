#!/usr/bin/env bash
# Celery's own unit tests for tasks, tracing, canvas, results and worker requests, run twice: as
# Celery ships them, and with LockedTask as the test app's default task class on MemoryBackend
# (tests/celery_suite_plugin.py). Exits non-zero when the LockedTask run fails a test that the
# plain run passes and that docs/drop-in.md does not list as a difference from celery.Task.
#
# The tests come from the sdist of the Celery release installed in .venv, fetched with pip, and
# run in a venv of their own (.celery-suite/) with the package, that Celery, and the test
# requirements those files import, pinned as the sdist's requirements/test.txt pins them.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/.celery-suite
venv=$work/venv

# The tests Celery's unit suite holds for what LockedTask touches.
FILES=(
    t/unit/tasks/test_tasks.py t/unit/tasks/test_trace.py t/unit/tasks/test_canvas.py
    t/unit/tasks/test_result.py t/unit/tasks/test_chord.py t/unit/tasks/test_context.py
    t/unit/tasks/test_stamping.py t/unit/worker/test_request.py t/unit/app/test_builtins.py
)

[ -x .venv/bin/python ] || { (. scripts/venv.sh && install_into_venv test) || exit 1; }
version=$(.venv/bin/python -c 'import celery; print(celery.__version__)') || exit 1
src=$work/celery-$version

if [ ! -d "$src/t/unit" ]; then
    mkdir -p "$work"
    .venv/bin/python -m pip download --quiet --no-deps --no-binary :all: "celery==$version" -d "$work" || exit 1
    tar -xzf "$work/celery-$version.tar.gz" -C "$work" || exit 1
fi

if [ ! -f "$venv/.installed-$version" ]; then
    rm -rf "$venv"
    .venv/bin/python -m venv "$venv" || exit 1
    # What the files above import beyond Celery: pytest (with subtests from 9 on, a plugin before)
    # and freezegun, at the sdist's pins.
    pins=$(grep -iE '^(pytest|freezegun)[=<>~ ]' "$src/requirements/test.txt")
    if ! grep -qE '^pytest==([9]|[1-9][0-9])\.' <<<"$pins"; then
        pins+=$'\n'$(grep -iE '^pytest-subtests[=<>~ ]' "$src/requirements/test.txt")
    fi
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install --quiet -e "$root" "celery==$version" $pins || exit 1
    touch "$venv/.installed-$version"
fi

run() {  # $1: a name for the run; the rest: pytest arguments
    local name=$1
    shift
    (cd "$src" && PYTHONPATH="$root" "$venv/bin/python" -m pytest -q -p no:cacheprovider -o addopts= \
        --strict-markers -rN --junitxml="$work/$name.xml" "$@" "${FILES[@]}") >"$work/$name.log" 2>&1
    tail -n 1 "$work/$name.log"
}

start=$(date +%s)
echo "celery $version: plain"
run plain
echo "celery $version: LockedTask on MemoryBackend"
run locked -p tests.celery_suite_plugin
echo "celery suite took $(($(date +%s) - start)) s"

"$venv/bin/python" "$root/tests/celery_suite_compare.py" "$work/plain.xml" "$work/locked.xml" "$root/docs/drop-in.md"
