"""The calls the demo sends: per round, a burst of duplicates and a few distinct calls per policy.

A burst is published in one go, so the duplicates reach the worker's pool
while the first copy runs and meet its lock. Each round moves the duplicate
burst to another account, and a few calls for other accounts show that
distinct arguments run side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

__all__ = ["Call", "round_calls", "POLICIES"]

#: Policy name -> task name in :mod:`.app`.
POLICIES = {"skip": "demo.skip", "retry": "demo.retry", "wait": "demo.wait", "raise": "demo.raise",
            "debounce": "demo.debounce", "limit": "demo.limited", "window": "demo.windowed"}

# (policy, duplicates of the round's hot account, distinct accounts)
_SHAPE: Tuple[Tuple[str, int, Tuple[str, ...]], ...] = (
    ("skip", 5, ("acct-3",)),
    ("raise", 3, ("acct-3",)),
    ("retry", 3, ("acct-3",)),
    ("wait", 2, ("acct-3",)),
    ("debounce", 6, ("acct-3",)),  # a burst of edits: one run, with the last
    ("limit", 4, ("acct-3",)),     # two run at once, the others meanwhile are skipped
    ("window", 3, ("acct-3",)),    # one start per window: acct-3 again next round is too soon
)


@dataclass(frozen=True)
class Call:
    """One ``apply_async`` the producer makes."""

    policy: str
    account: str
    seq: int

    @property
    def task(self) -> str:
        return POLICIES[self.policy]


def round_calls(round_no: int) -> List[Call]:
    """The calls of round ``round_no``: duplicate bursts first, then the distinct calls."""
    hot = f"acct-{1 + round_no % 2}"
    calls: List[Call] = []
    for policy, duplicates, distinct in _SHAPE:
        calls.extend(Call(policy, hot, seq) for seq in range(duplicates))
        calls.extend(Call(policy, account, duplicates + i) for i, account in enumerate(distinct))
    return calls
