# Sourced by the scripts beside it: make .venv once (python3, 3.9+) and install the
# package into it with the extras named in $1, e.g. `install_into_venv test,bench`.
install_into_venv() {
    cd "$(dirname "${BASH_SOURCE[0]}")/.."
    if [ ! -x .venv/bin/python ]; then
        "${PYTHON:-python3}" -m venv .venv
    fi
    .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
    .venv/bin/python -m pip install --quiet -e ".[$1]"
}
