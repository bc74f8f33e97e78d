"""Interleaved repeats and the numbers reported from them: median, min, max and same-run ratios.

The machine is small and shared: a lone absolute number means little. Every
section runs its variants in rounds, in an order shuffled each round (seeded, so a
rerun takes the same orders): no variant always goes first, or always right after
the same neighbour (whose garbage and cold caches it would pay for), and reports each
variant's median/min/max together with its ratio to a baseline *measured in the
same round*; the median of those per-round ratios is the headline.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, TypeVar

__all__ = ["Summary", "Series", "interleave", "round_orders", "summarize", "ratio_series"]

T = TypeVar("T")


@dataclass
class Summary:
    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Summary":
        values = [v for v in values if v is not None]
        if not values:
            return cls(float("nan"), float("nan"), float("nan"), 0)
        return cls(statistics.median(values), min(values), max(values), len(values))


@dataclass
class Series:
    """Per-round measurements of each variant (rounds are aligned across variants)."""

    rounds: Dict[str, List[float]] = field(default_factory=dict)

    @classmethod
    def declared(cls, variants: Sequence[str]) -> "Series":
        """A series that reports ``variants`` in this order, whatever order the rounds ran them in."""
        return cls({variant: [] for variant in variants})

    def add(self, variant: str, value: float) -> None:
        self.rounds.setdefault(variant, []).append(value)

    def summary(self, variant: str) -> Summary:
        return Summary.of(self.rounds.get(variant, []))

    def ratio(self, variant: str, baseline: str, invert: bool = False) -> Summary:
        """Per-round ``variant / baseline`` (or ``baseline / variant``), summarized."""
        return Summary.of(ratio_series(self.rounds.get(variant, []), self.rounds.get(baseline, []), invert))

    @property
    def variants(self) -> List[str]:
        return list(self.rounds)


def ratio_series(values: Sequence[float], baseline: Sequence[float], invert: bool = False) -> List[float]:
    out = []
    for v, b in zip(values, baseline):
        if v is None or b is None or (b == 0 and not invert) or (v == 0 and invert):
            continue
        out.append(b / v if invert else v / b)
    return out


def round_orders(variants: Sequence[T], rounds: int, seed: int = 5) -> List[List[T]]:
    """One order of ``variants`` per round, shuffled (seeded)."""
    shuffler = random.Random(seed)
    return [shuffler.sample(list(variants), len(variants)) for _ in range(rounds)]


def interleave(variants: Sequence[T], rounds: int) -> Iterable[tuple]:
    """``(round, variant)`` pairs, the variants in a shuffled order each round."""
    for r, order in enumerate(round_orders(variants, rounds)):
        for variant in order:
            yield r, variant


def summarize(series: Series, baseline: Optional[str], invert: bool = False) -> List[dict]:
    """Rows for a table: variant, median/min/max and the ratio to ``baseline``."""
    rows = []
    for variant in series.variants:
        row = {"variant": variant, "value": series.summary(variant)}
        if baseline is not None:
            row["ratio"] = series.ratio(variant, baseline, invert)
        rows.append(row)
    return rows
