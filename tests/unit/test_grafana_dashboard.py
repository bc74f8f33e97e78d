"""docs/grafana-dashboard.json queries exactly the metrics the library exports.

Every PromQL expression in the dashboard names at least one metric, each name it uses is an exported
series (a histogram's ``_bucket``/``_sum``/``_count`` included), and every exported metric is shown.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator, Set

from celery_singleton_lock.metrics.instruments import METRIC_NAMES

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
NAME = re.compile(r"\bsingleton_lock_[a-z_]+\b")


def _expressions(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):  # a panel's query, a variable's
                yield value
            else:
                yield from _expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from _expressions(item)


def _series() -> Set[str]:
    names = set()
    for name, kind in METRIC_NAMES.items():
        names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    return names


def test_every_expression_names_an_exported_metric_and_every_metric_is_shown() -> None:
    expressions = list(_expressions(json.loads(DASHBOARD.read_text())))
    assert expressions, "the dashboard has no queries"
    series, used = _series(), set()
    for expr in expressions:
        names = set(NAME.findall(expr))
        assert names, f"{expr!r} names no metric of the library"
        assert names <= series, f"{expr!r} names {sorted(names - series)}, which the library does not export"
        used |= {re.sub(r"_(bucket|sum|count)$", "", n) if n not in METRIC_NAMES else n for n in names}
    assert set(METRIC_NAMES) <= used, f"not on the dashboard: {sorted(set(METRIC_NAMES) - used)}"
