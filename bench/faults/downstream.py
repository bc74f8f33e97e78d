"""The downstream store the bodies write to: a write is accepted only with a fence not below the last.

An equal fence is the same holder writing again (fences are handed to one holder each);
a lower one is a holder that lost its lock to a newer one which already wrote. Under
``lock_limit=N`` up to N holders write at once, each with its own fence: a write is
accepted while its fence is not below the N-th largest accepted for the key (a holder
with N newer writers has surely lost its place).
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


# KEYS[1]: a sorted set of the N largest fences accepted for the key.
# ARGV[1]: the writer's fence; ARGV[2]: N. Returns as FENCED_WRITE, previous being the
# N-th largest accepted fence (the bar the write had to clear), "" when fewer than N.
FENCED_WRITE_PLACES = """
local n = tonumber(ARGV[2])
local bar = redis.call('ZRANGE', KEYS[1], -n, -n)[1]
if bar and tonumber(bar) > tonumber(ARGV[1]) then
    return {0, bar}
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -n - 1)
return {1, bar or ''}
"""


class FencedStore:
    def __init__(self, url: str, places: int = 1) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=10)
        self.places = places
        self._write = self.client.register_script(FENCED_WRITE if places == 1 else FENCED_WRITE_PLACES)

    def write(self, key: str, fence: int) -> Tuple[bool, Optional[int]]:
        """Whether the write was accepted, and the fence it had to clear."""
        if self.places == 1:
            accepted, last = self._write(keys=[f"fence:{key}"], args=[fence])
        else:
            accepted, last = self._write(keys=[f"fences:{key}"], args=[fence, self.places])
        return bool(accepted), int(last) if last else None
