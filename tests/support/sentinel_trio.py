"""Sentinel as operators run it: one master, two replicas and three sentinels (quorum 2), on loopback.

Two replicas, so that a failover promotes one while the other still follows the old master
for a moment (what ``replica_ack`` must not be fooled by); three sentinels, so that they
disagree for a moment about which server is the master. Every process keeps nothing on disk
and is stopped by its own pid.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import redis

from tests.support.servers import RedisServer, free_port, reachable, redis_server_binary
from tests.support.waits import wait_for

__all__ = ["SentinelTrio", "acknowledged"]

#: No 5 s wait before a diskless full sync; a short ping period so a dead link is noticed.
_REPLICATION_ARGS = ["--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"]


class SentinelTrio:
    """A master, two replicas and three sentinels watching them as ``master_name``."""

    master_name = "csltrio"

    def __init__(self, down_after_ms: int = 500) -> None:
        self.servers: List[RedisServer] = []
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels: List[subprocess.Popen] = []
        self._down_after_ms = down_after_ms
        self._dir = tempfile.mkdtemp(prefix="csl-trio-")

    def start(self, timeout: float = 30.0) -> "SentinelTrio":
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> "SentinelTrio":
        master = RedisServer(extra_args=_REPLICATION_ARGS).start(settle=False)
        self.servers = [master]
        for _ in range(2):
            self.servers.append(RedisServer(extra_args=["--replicaof", "127.0.0.1", str(master.port),
                                                        *_REPLICATION_ARGS]).start(settle=False))
        wait_for(lambda: acknowledged(master.port, 2), timeout, interval=0.05, what="both replicas to acknowledge")
        for index, port in enumerate(self.sentinel_ports):
            config = os.path.join(self._dir, f"sentinel-{index}.conf")
            with open(config, "w") as handle:
                handle.write(f"port {port}\nbind 127.0.0.1\ndir {self._dir}\nlogfile sentinel-{index}.log\n"
                             f"sentinel monitor {self.master_name} 127.0.0.1 {master.port} 2\n"
                             f"sentinel down-after-milliseconds {self.master_name} {self._down_after_ms}\n"
                             f"sentinel failover-timeout {self.master_name} 2000\n"
                             f"sentinel parallel-syncs {self.master_name} 2\n")
            self.sentinels.append(subprocess.Popen([redis_server_binary(), config, "--sentinel"],
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                   start_new_session=True))
        for port in self.sentinel_ports:
            wait_for(lambda: reachable(f"redis://127.0.0.1:{port}"), timeout, what="a sentinel")
        wait_for(self.ready, timeout, interval=0.1, what="every sentinel to see both replicas and the others")
        for server in self.servers:
            server.settle()
        return self

    def ready(self, linked: int = 2) -> bool:
        """Every sentinel names the same master, sees ``linked`` replicas linked and the two other sentinels."""
        names = set()
        for port in self.sentinel_ports:
            client = _client(port)
            try:
                master = client.sentinel_master(self.master_name)
                replicas = client.sentinel_slaves(self.master_name)
            except (redis.RedisError, OSError):
                return False
            finally:
                client.close()
            healthy = [r for r in replicas if r["is_slave"] and not r["is_sdown"] and r["master-link-status"] == "ok"]
            if len(healthy) < linked or int(master["num-other-sentinels"]) < 2:
                return False
            names.add(int(master["port"]))
        return len(names) == 1

    @property
    def url(self) -> str:
        return ";".join(f"sentinel://127.0.0.1:{port}" for port in self.sentinel_ports)

    @property
    def master(self) -> RedisServer:
        """The server that answers as master and that the first sentinel names."""
        port = self.named()[0]
        return self.server(port)

    def server(self, port: int) -> RedisServer:
        return next(s for s in self.servers if s.port == port)

    def named(self) -> Tuple[int, ...]:
        """The master's port as each sentinel names it (0 when one does not answer)."""
        ports = []
        for port in self.sentinel_ports:
            client = _client(port)
            try:
                ports.append(int(client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                                        self.master_name)[1]))
            except (redis.RedisError, OSError, TypeError):
                ports.append(0)
            finally:
                client.close()
        return tuple(ports)

    def failover(self, timeout: float = 30.0) -> Tuple[RedisServer, float]:
        """``SENTINEL FAILOVER`` at one sentinel; returns the promoted server once every sentinel names
        it, and the monotonic time it first answered ``role:master`` (the promotion)."""
        old = self.master
        _client(self.sentinel_ports[0]).execute_command("SENTINEL", "FAILOVER", self.master_name)
        promoted: Dict[int, float] = {}
        asked = [time.monotonic()]

        def promotion() -> Optional[RedisServer]:
            if not promoted and time.monotonic() - asked[0] > 5.0:  # a sentinel may drop a forced failover
                asked[0] = time.monotonic()
                try:
                    _client(self.sentinel_ports[0]).execute_command("SENTINEL", "FAILOVER", self.master_name)
                except redis.ResponseError:  # one in progress after all
                    pass
            for server in self.servers:
                if server is not old and server.port not in promoted and _role(server.port) == "master":
                    promoted[server.port] = time.monotonic()
            named = set(self.named())
            if len(named) == 1 and old.port not in named and next(iter(named)) in promoted:
                return self.server(next(iter(named)))
            return None

        try:
            new = wait_for(promotion, timeout, interval=0.01, what="a replica promoted and named by every sentinel")
        except Exception as exc:
            raise AssertionError(f"{exc}: {self.describe()}") from None
        return new, promoted[new.port]

    def describe(self) -> str:
        """Each server's role and each sentinel's view, for a failover that did not end."""
        views = []
        for port in self.sentinel_ports:
            client = _client(port)
            try:
                state = client.sentinel_master(self.master_name)
                views.append({k: state.get(k) for k in ("port", "flags", "failover-state", "config-epoch",
                                                        "num-slaves")})
            except (redis.RedisError, OSError) as exc:
                views.append({"error": str(exc)})
            finally:
                client.close()
        logs = []
        for index in range(len(self.sentinel_ports)):
            try:
                with open(os.path.join(self._dir, f"sentinel-{index}.log"), errors="replace") as handle:
                    logs.append(" | ".join(line.strip()[-120:] for line in handle.readlines()[-12:]))
            except OSError:
                pass
        return (f"roles {[(s.port, _role(s.port)) for s in self.servers]}, sentinels {views}, "
                f"their last log lines: {logs}")

    def demote(self) -> None:
        """What the sentinels do to an old master some ten seconds after a failover, done now."""
        master = self.master
        for server in self.servers:
            if server is not master and _role(server.port) == "master":
                client = _client(server.port)
                try:
                    client.replicaof("127.0.0.1", master.port)
                finally:
                    client.close()

    def wait_settled(self, timeout: float = 40.0) -> None:
        """Until the demoted master follows the new one and every sentinel sees both replicas linked (up to
        ten seconds after the demotion: the next failover may promote either)."""

        def settled() -> bool:
            master = self.master  # asked each time: a loaded machine may make the sentinels fail over again
            return (all(_role(s.port) == "slave" for s in self.servers if s is not master)
                    and acknowledged(master.port, 2))

        try:
            wait_for(settled, timeout, interval=0.1, what="the old master to be demoted and both replicas to follow")
            # Every sentinel must have seen the old master report itself a replica (it looks every 10 s): a
            # sentinel that has not turns it back into a replica the moment a failover promotes it.
            wait_for(self.ready, timeout, interval=0.1, what="the sentinels to see both replicas linked")
        except Exception as exc:
            raise AssertionError(f"{exc}: {self.describe()}") from None

    def stop(self) -> None:
        for sentinel in self.sentinels:
            if sentinel.poll() is None:
                sentinel.kill()
                sentinel.wait(10)
        for server in self.servers:
            server.stop()
            shutil.rmtree(server._dir, ignore_errors=True)
        shutil.rmtree(self._dir, ignore_errors=True)


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, decode_responses=True, socket_timeout=2, socket_connect_timeout=2)


def _role(port: int) -> str:
    client = _client(port)
    try:
        return str(client.execute_command("ROLE")[0])
    except (redis.RedisError, OSError):
        return ""
    finally:
        client.close()


def acknowledged(port: int, replicas: int) -> bool:
    """Whether a write on the server at ``port`` is acknowledged by ``replicas`` replicas within 200 ms."""
    client = _client(port)
    try:
        client.set("csl-probe", 1)
        acked = client.execute_command("WAIT", replicas, 200)
        client.delete("csl-probe")
        return int(acked) >= replicas
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()
