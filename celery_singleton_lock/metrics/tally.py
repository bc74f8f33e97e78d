"""The numbers the metrics add to, one per series, laid out as prometheus_client's multiprocess files.

A lock event adds to a few numbers at once; prometheus_client's metric objects would take a
lock, check the process and pack the value again for each of them. Here an event takes one
lock and adds in place, at offsets fixed when a series is first seen.

The layout is prometheus_client's multiprocess file format (a used-bytes header, then entries
of key, value and timestamp, each value 8-byte aligned), so the same buffers serve both modes:
in this process's memory for a registry the library collects itself (:mod:`.families`), or as
files in ``PROMETHEUS_MULTIPROC_DIR`` (one per tally, process and metric type, named apart from
prometheus_client's own) that its ``MultiProcessCollector`` reads beside everything else there.
"""

from __future__ import annotations

import itertools
import json
import mmap
import os
import struct
import threading
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

__all__ = ["Tally", "KINDS", "FILE_SUFFIX", "series_key"]

#: The metric types, as the files name them (a gauge's name carries its multiprocess mode).
KINDS = ("counter", "histogram", "gauge_livesum")
#: What this library's file names add after the pid (prometheus_client's are ``<type>_<pid>.db``).
FILE_SUFFIX = "-singleton-lock"

#: Tells apart the files of two tallies of one process (two apps with registries of their own).
_NUMBERS = itertools.count(1)
_HEADER = 8
_INITIAL = 1 << 16
_USED = struct.Struct("i")


def series_key(metric: str, sample: str, labels: Dict[str, str], documentation: str) -> str:
    """A series' key in the file, exactly as prometheus_client writes and reads it."""
    return json.dumps([metric, sample, labels, documentation], sort_keys=True)


def _entry(key: str) -> bytes:
    encoded = key.encode("utf-8")
    padded = encoded + b" " * (8 - (len(encoded) + 4) % 8)
    return struct.pack(f"i{len(padded)}sdd", len(encoded), padded, 0.0, 0.0)


class _Buffer:
    """One metric type's entries: in memory, or in a mapped file other processes read."""

    def __init__(self, path: Optional[str], keys: Sequence[str] = ()) -> None:
        self._file = open(path, "w+b") if path else None
        self._capacity = 0
        self._data: Any = None
        #: The values, as doubles, by index: an aligned store is one write other processes see whole.
        self.values: Any = memoryview(b"")
        self._grow(_INITIAL)
        self._used = _HEADER
        self._write_used()
        for key in keys:
            self.add_key(key)

    def _grow(self, capacity: int) -> None:
        old = self._data
        self.values.release()
        if self._file is not None:
            self._file.truncate(capacity)
            data: Any = mmap.mmap(self._file.fileno(), capacity)
            if old is not None:
                old.close()
        else:
            data = bytearray(capacity)
            if old is not None:
                data[:self._capacity] = old
        self._data = data
        self._capacity = capacity
        self.values = memoryview(data).cast("d")

    def _write_used(self) -> None:
        self._data[0:4] = _USED.pack(self._used)

    def add_key(self, key: str) -> int:
        """The index of a new series' value (the entry is written before the header counts it)."""
        entry = _entry(key)
        capacity = self._capacity
        while self._used + len(entry) > capacity:
            capacity *= 2
        if capacity != self._capacity:
            self._grow(capacity)
        self._data[self._used:self._used + len(entry)] = entry
        self._used += len(entry)
        self._write_used()
        return (self._used - 16) // 8

    def close(self) -> None:
        self.values.release()
        if self._file is not None:
            self._data.close()
            self._file.close()


class Tally:
    """This process's numbers of one set of metrics, changed under one lock.

    ``directory`` is where the files go (``None``: in memory). A forked child starts files of
    its own, with the same series at the same indices and every value at zero: the parent's
    counts stay the parent's.
    """

    def __init__(self, directory: Optional[str]) -> None:
        self.directory = directory
        self.lock = threading.Lock()
        #: (type, key) -> value index, in the order the series were first seen.
        self._index: Dict[Tuple[str, str], int] = {}
        self._pid = os.getpid()
        self._number = next(_NUMBERS)
        self.buffers = self._open()

    def _open(self) -> Dict[str, _Buffer]:
        buffers = {kind: _Buffer(self._path(kind), [key for (of, key) in self._index if of == kind])
                   for kind in KINDS}
        #: Each type's buffer, by name (an event adds through ``<buffer>.values[index]``).
        self.counters, self.histograms, self.gauges = (buffers[kind] for kind in KINDS)
        return buffers

    def _path(self, kind: str) -> Optional[str]:
        if self.directory is None:
            return None
        return os.path.join(self.directory, f"{kind}_{os.getpid()}{FILE_SUFFIX}-{self._number}.db")

    def index(self, kind: str, key: str) -> int:
        """The value index of a series (made on first use; call with :attr:`lock` held)."""
        found = self._index.get((kind, key))
        if found is None:
            found = self._index[(kind, key)] = self.buffers[kind].add_key(key)
        return found

    def after_fork(self) -> None:
        """In a forked child: files of its own (the parent's lock may have been held at the fork)."""
        self.lock = threading.Lock()
        if self.directory is not None and self._pid != os.getpid():
            self._pid = os.getpid()
            inherited, self.buffers = self.buffers, self._open()
            for buffer in inherited.values():
                buffer.close()  # this process's mapping of the parent's files only

    def entries(self, kind: str) -> Iterator[Tuple[str, float]]:
        """Every series of a type and its value now."""
        with self.lock:
            values = self.buffers[kind].values
            return iter([(key, values[index]) for (of, key), index in self._index.items() if of == kind])

    def close(self) -> None:
        for buffer in self.buffers.values():
            buffer.close()
