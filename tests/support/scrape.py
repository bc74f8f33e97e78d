"""Reading a worker's /metrics endpoint as a test sees it: sample name and labels -> value."""

from __future__ import annotations

import urllib.request
from typing import Dict, FrozenSet, Tuple

from prometheus_client.parser import text_string_to_metric_families

from tests.support.servers import free_port

__all__ = ["free_port", "scrape", "Samples"]

Samples = Dict[Tuple[str, FrozenSet[Tuple[str, str]]], float]


def scrape(port: int, host: str = "127.0.0.1") -> "Scraped":
    where = f"[{host}]" if ":" in host else host
    with urllib.request.urlopen(f"http://{where}:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return Scraped(samples)


class Scraped:
    def __init__(self, samples: Samples) -> None:
        self.samples = samples

    def value(self, name: str, **labels: str) -> float:
        """The sum over every series of ``name`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and wanted <= ls)

    def by(self, name: str, label: str, **labels: str) -> Dict[str, float]:
        """``label`` value -> summed value, for the non-zero series of ``name`` matching ``labels``."""
        found: Dict[str, float] = {}
        wanted = set(labels.items())
        for (n, ls), v in self.samples.items():
            if n == name and wanted <= ls and v:
                key = dict(ls).get(label, "")
                found[key] = found.get(key, 0.0) + v
        return found
