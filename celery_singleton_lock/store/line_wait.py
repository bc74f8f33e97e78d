"""The loop of a waiter in line (:mod:`.line`), one for a task's call and a ``SharedLock`` block.

Ask; if refused, listen: for the key's releases while among the first in line (a freed place
is one of theirs), else only for the word that it became one of them; at least every third of
its lease ask again, which keeps its place. A waiter that just became one of the first asks
once more before it blocks, so that a release between its ask and its subscription is not lost.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Tuple, Union

from .backend import Conflict, Grant
from .line import LEASE_MS, first_in_line
from .start_gate import RestartWait, wait_for_gate

__all__ = ["wait_in_line"]

Asked = Tuple[Union[Grant, Conflict], float]


def wait_in_line(store: Any, key: str, token: str, ask: Callable[[], Asked], deadline: float,
                 on_young: Optional[Callable[[RestartWait], None]] = None) -> Asked:
    """Ask in ``key``'s line (``ask()``: one ask, and when it began) until granted or ``deadline``
    (``time.monotonic()``); the last answer. A young store's refusals are waited out (``on_young``)."""
    with store.line_events(key, token) as events:
        while True:
            outcome, started = wait_for_gate(ask, on_young)
            remaining = deadline - time.monotonic()
            if isinstance(outcome, Grant) or remaining <= 0:
                return outcome, started
            first = first_in_line(outcome)
            if events.follow(first):
                continue  # it listens for releases from now: a release since its ask is found by asking
            wait = min(remaining, LEASE_MS / 3000.0)
            if first:  # also when the soonest place would end (a window, a dead holder's lease)
                wait = min(wait, max(outcome.pttl_ms, 1) / 1000.0 + 0.01)
            events.listen(wait)
