"""Release announcements of a :class:`~.memory.MemoryBackend`: one condition, every waiter hears each."""

from __future__ import annotations

from typing import Any

__all__ = ["MemoryReleaseEvents"]


class MemoryReleaseEvents:
    """A waiter on one key's release announcements in a :class:`MemoryBackend`."""

    def __init__(self, backend: Any, key: str, seen: int) -> None:
        self._backend = backend
        self._key = key
        self._seen = seen

    def _take(self) -> bool:
        """Whether a release was announced since the last look (called with the condition held)."""
        count = self._backend._releases.get(self._key, 0)
        announced, self._seen = count > self._seen, count
        return announced

    def ask(self) -> bool:
        """Ask the holder to announce its release; ``False`` when the lock is free."""
        return self._backend.await_release(self._key)

    def follow(self, first: bool) -> bool:
        """A waiter in line hears every release, among the first or not (see :class:`~.events.LineEvents`)."""
        return False

    def listen(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds without asking (a waiter in line asked with its ask)."""
        backend = self._backend
        with backend._cond:
            backend._cond.wait_for(lambda: backend._releases.get(self._key, 0) > self._seen, timeout=max(timeout, 0.0))
            return self._take()

    def wait(self, timeout: float) -> bool:
        """Ask, then block up to ``timeout`` seconds; ``True`` when a release was announced."""
        backend = self._backend
        with backend._cond:
            if self._take():
                return True
            if not backend.await_release(self._key):
                return False  # free: nothing to announce
            backend._cond.wait_for(lambda: backend._releases.get(self._key, 0) > self._seen,
                                   timeout=max(timeout, 0.0))
            return self._take()
