"""Where a message goes when Redis hands it to a consumer that was just SIGKILLed.

``python -m bench.faults.probe [TRIALS]``: a child process blocks in ``BRPOP`` (as kombu's
Redis transport does while it waits for work); the probe SIGKILLs it and at once ``LPUSH``es
one message. Redis serves a blocked client before it notices the closed connection, so the
message is popped for the dead client and is then in no list at all: no ``unacked`` copy can
exist, since kombu writes that copy only after ``BRPOP`` returned to it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import List

import redis

from tests.support.servers import RedisServer  # the test suite's own server helper

__all__ = ["probe"]

_BLOCK = "import redis, sys; redis.Redis.from_url(sys.argv[1]).brpop('probe', 30)"


def _blocked(client: redis.Redis) -> bool:
    return any(c.get("cmd") == "brpop" for c in client.client_list())


def probe(trials: int = 20, wait_for_close: bool = False) -> int:
    """How many of ``trials`` messages vanished, pushed right after the kill (or, with
    ``wait_for_close``, once Redis dropped the dead client: the contrast)."""
    vanished = 0
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        for trial in range(trials):
            child = subprocess.Popen([sys.executable, "-c", _BLOCK, server.url])
            while not _blocked(client):
                time.sleep(0.005)
            os.kill(child.pid, signal.SIGKILL)
            while wait_for_close and _blocked(client):
                time.sleep(0.005)
            client.lpush("probe", f"message {trial}")
            child.wait()
            time.sleep(0.05)
            vanished += client.llen("probe") == 0
            client.delete("probe")
        client.close()
    return vanished


def main(argv: List[str]) -> int:
    trials = int(argv[0]) if argv else 20
    lost, control = probe(trials), probe(trials, wait_for_close=True)
    print(f"{lost} of {trials} messages pushed just after a blocked BRPOP client was SIGKILLed were popped "
          f"for the dead client and are in no list; {control} of {trials} when pushed after Redis dropped it")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
