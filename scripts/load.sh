# Sourced by the test scripts: `keep_cores_busy N` keeps N cores busy (a `yes > /dev/null` each)
# until the script exits, so a run shows whether the suite passes on a loaded machine.
_busy_pids=()

_stop_busy() {
    if [ "${#_busy_pids[@]}" -gt 0 ]; then
        kill "${_busy_pids[@]}" 2>/dev/null || true
        wait "${_busy_pids[@]}" 2>/dev/null || true
        _busy_pids=()
    fi
}

keep_cores_busy() {
    local n=$1 i
    case "$n" in
        '' | *[!0-9]*) echo "--stress takes a number of cores, not '$n'" >&2; return 2 ;;
    esac
    trap _stop_busy EXIT
    trap '_stop_busy; exit 130' INT
    trap '_stop_busy; exit 143' TERM
    for ((i = 0; i < n; i++)); do
        yes >/dev/null &
        _busy_pids+=("$!")
    done
    echo "keeping $n core(s) busy while the tests run" >&2
}
