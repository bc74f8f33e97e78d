#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml, pages in docs/) into build/site, with every warning an
# error: a broken link or anchor between pages, a page missing from the nav, a Reference page that
# differs from the code's option table (scripts/reference.py).
#
#   bash scripts/docs.sh            build it
#   bash scripts/docs.sh --serve    serve it at http://127.0.0.1:8000, rebuilt on each change
set -euo pipefail
. "$(dirname "$0")/venv.sh"

install_into_venv docs
export NO_MKDOCS_2_WARNING=1
.venv/bin/python scripts/reference.py --check
if [ "${1:-}" = "--serve" ]; then
    exec .venv/bin/mkdocs serve --strict
fi
.venv/bin/mkdocs build --strict
