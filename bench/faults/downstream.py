"""The downstream store the bodies write to: a write is accepted only with a fence not below the last.

An equal fence is the same holder writing again (fences are handed to one holder each);
a lower one is a holder that lost its lock to a newer one which already wrote.
"""

from __future__ import annotations

from typing import Optional, Tuple

import redis

__all__ = ["FencedStore"]

# KEYS[1]: the key's last accepted fence.
# ARGV[1]: the writer's fence (an integer below 2^53).
# Returns {1, previous} when accepted (and stores ARGV[1]), {0, previous} when refused;
# previous is the last accepted fence as a string, "" when none.
FENCED_WRITE = """
local last = redis.call('GET', KEYS[1])
if last and tonumber(last) > tonumber(ARGV[1]) then
    return {0, last}
end
redis.call('SET', KEYS[1], ARGV[1])
return {1, last or ''}
"""


class FencedStore:
    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=10)
        self._write = self.client.register_script(FENCED_WRITE)

    def write(self, key: str, fence: int) -> Tuple[bool, Optional[int]]:
        """Whether the write was accepted, and the last fence accepted before it."""
        accepted, last = self._write(keys=[f"fence:{key}"], args=[fence])
        return bool(accepted), int(last) if last else None
