"""A registry's view of a :class:`~.tally.Tally` kept in memory: its series as Prometheus families.

Under a served worker the files are read by prometheus_client's ``MultiProcessCollector``
instead (:mod:`.serve`); both show the same names, labels and types, and both list every family
from the first scrape (:func:`every_family`), before any lock event: a family that is missing
looks like a broken exporter, and a rule over it matches nothing instead of zero.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Dict, Iterable, Iterator, List, Sequence, Tuple

from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from .tally import Tally

__all__ = ["TallyCollector", "every_family"]

_TYPES = {"counter": "counter", "histogram": "histogram", "gauge_livesum": "gauge"}


def every_family(found: Iterable[Metric], described: Sequence[Tuple[str, str, str]]) -> Iterator[Metric]:
    """The families ``found``, then each ``(name, help, kind)`` of ``described`` not among them, with no
    sample yet (shown with its help and type)."""
    seen = set()
    for family in found:
        seen.add(family.name)
        yield family
    for name, documentation, kind in described:
        if name not in seen:
            yield Metric(name, documentation, _TYPES[kind])


class TallyCollector:
    """A custom collector of one tally, registered in the user's registry.

    ``described`` is every family it can show, as ``(name, help, type)``: the registry checks
    names against its other metrics once, and a scrape asking for some names by ``name[]``
    finds these.
    """

    def __init__(self, tally: Tally, described: Sequence[Tuple[str, str, str]] = ()) -> None:
        self._tally = tally
        self._described = tuple(described)

    def collect(self) -> Iterator[Metric]:
        families: Dict[str, Metric] = {}
        for kind, typ in _TYPES.items():
            buckets: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], List[Tuple[float, float]]] = defaultdict(list)
            for key, value in self._tally.entries(kind):
                metric, sample, labels, documentation = json.loads(key)
                family = families.get(metric)
                if family is None:
                    family = families[metric] = Metric(metric, documentation, typ)
                if "le" in labels:
                    rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
                    buckets[(metric, rest)].append((float(labels["le"]), value))
                else:
                    family.add_sample(sample, labels, value)
            for (metric, rest), counts in buckets.items():
                total = 0.0
                for bound, count in sorted(counts):
                    total += count
                    families[metric].add_sample(metric + "_bucket", dict(rest, le=floatToGoString(bound)), total)
                families[metric].add_sample(metric + "_count", dict(rest), total)
        return every_family(families.values(), self._described)

    def describe(self) -> List[Metric]:
        return [Metric(name, documentation, _TYPES[kind]) for name, documentation, kind in self._described]
