#!/usr/bin/env bash
# Run every benchmark against the peers and rewrite docs/benchmarks.md and docs/bench-*.png.
# Makes .venv once and installs the package with its bench extra (the peers, matplotlib).
# Starts its own redis-server processes and workers, and stops them at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet -e '.[test,bench]'
exec .venv/bin/python -m bench "$@"
