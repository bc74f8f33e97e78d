"""The fencing half of :class:`~.quorum.QuorumBackend`: fences a majority of masters confirm.

See the "Fencing" paragraph of :mod:`.quorum` for why a fence needs a majority of
counters at or above it, and not merely the largest answer.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional

from .fanout import Results

__all__ = ["QuorumFencing"]


class QuorumFencing:
    """Mixed into :class:`~.quorum.QuorumBackend`, whose fan-out and majority it uses."""

    nodes: List[Any]
    quorum: int
    _fence_hint: Dict[str, int]  # fence key -> largest fence seen by this process
    _guard: threading.Lock
    _broadcast: Callable[..., Results]
    _unavailable: Callable[[str, Results], Exception]

    def fence(self, key: str, fence_key: str, token: str) -> Optional[int]:
        """A fence confirmed by a majority of the masters that hold ``key`` under ``token``."""
        floor = self._fence_hint[fence_key] + 1 if fence_key in self._fence_hint else 0
        n, q = len(self.nodes), self.quorum
        results = self._broadcast(
            lambda node: node.fence(key, fence_key, token, floor=floor),
            decided=lambda r: sum(isinstance(v, int) for v in r.values()) >= q or
            sum(1 for v in r.values() if v is None) > n - q)
        grants = {i: value for i, value in results.items() if isinstance(value, int) and not isinstance(value, bool)}
        if grants:
            self._note_fence(fence_key, max(grants.values()))
        if len(grants) >= q:
            fence = self._settle_fence(fence_key, grants)
            if fence is None:
                raise self._unavailable(f"fence of {key}: no majority could confirm it", results)
            return fence
        if sum(1 for value in results.values() if value is None) > n - q:
            return None  # a majority does not hold it under this token
        raise self._unavailable(f"fence of {key}", results)

    def _settle_fence(self, fence_key: str, grants: Dict[int, int]) -> Optional[int]:
        """The fence to hand out, once a majority of the masters hold a counter >= it."""
        top = max(grants.values())
        if sum(1 for value in grants.values() if value == top) >= self.quorum:
            return top
        raised = self._broadcast(lambda node: node.raise_fence(fence_key, top), indices=list(grants))
        confirmed = sum(1 for value in raised.values() if isinstance(value, int) and value >= top)
        return top if confirmed >= self.quorum else None

    def _note_fence(self, fence_key: str, fence: int) -> None:
        with self._guard:
            if fence > self._fence_hint.get(fence_key, 0):
                self._fence_hint[fence_key] = fence

