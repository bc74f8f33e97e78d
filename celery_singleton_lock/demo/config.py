"""Where the demo talks to and where its keys live, read from the environment.

The runner, the worker and beat are separate processes started with the same
environment, so they agree on the Redis URL and the namespace without passing
anything else around. Every key the demo makes (broker queues, results, locks,
records) starts with the namespace, so the demo can delete exactly its own keys
from a Redis it shares with anything else.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional, Tuple

__all__ = ["DemoConfig", "DEFAULT_REDIS_URL", "DEFAULT_NAMESPACE"]

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"
DEFAULT_NAMESPACE = "csl-demo"
#: A namespace is a plain name: no glob character can make the demo's SCAN MATCH reach other keys.
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


@dataclass(frozen=True)
class DemoConfig:
    """``REDIS_URL`` (any database; default 0) and ``CSL_DEMO_NAMESPACE`` (a key prefix)."""

    redis_url: str = DEFAULT_REDIS_URL
    namespace: str = DEFAULT_NAMESPACE
    #: The beat job's schedule and body length: the body is slower than the schedule on purpose.
    report_every: float = 1.0
    report_seconds: float = 2.5

    def __post_init__(self) -> None:
        if not _NAMESPACE.fullmatch(self.namespace):
            raise ValueError(f"CSL_DEMO_NAMESPACE={self.namespace!r}: use letters, digits and _ . : - "
                             "(every key the demo makes and deletes starts with it)")

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "DemoConfig":
        env = os.environ if environ is None else environ
        return cls(redis_url=env.get("REDIS_URL") or DEFAULT_REDIS_URL,
                   namespace=env.get("CSL_DEMO_NAMESPACE") or DEFAULT_NAMESPACE)

    @property
    def lock_prefix(self) -> str:
        return f"{self.namespace}:lock"

    @property
    def broker_prefix(self) -> str:
        return f"{self.namespace}:broker:"

    @property
    def result_prefix(self) -> str:
        return f"{self.namespace}:result:"

    def key(self, name: str) -> str:
        """A key of the demo's own records."""
        return f"{self.namespace}:demo:{name}"

    @property
    def key_prefixes(self) -> Tuple[str, ...]:
        """What every key the demo makes starts with: locks, broker, results, its records."""
        return (f"{self.lock_prefix}:", self.broker_prefix, self.result_prefix, self.key(""))
