#!/usr/bin/env bash
# Run every benchmark against the peers and rewrite docs/benchmarks.md and docs/bench-*.png.
# Makes .venv once and installs the package with its bench extra (the peers, matplotlib).
# Starts its own redis-server processes and workers, and stops them at the end.
set -euo pipefail
. "$(dirname "$0")/venv.sh"
install_into_venv test,bench
exec .venv/bin/python -m bench "$@"
