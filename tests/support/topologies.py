"""Local Redis topologies for tests: independent masters, a Redis Cluster, Sentinel with a replica.

Every process runs on free ports of 127.0.0.1, keeps nothing on disk, and is
stopped (by its own pid) when the topology's ``stop`` runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Dict, List, Optional

import redis

from tests.support.servers import RedisServer, free_port, reachable, redis_server_binary
from tests.support.waits import wait_for

__all__ = ["Masters", "LocalCluster", "SentinelGroup"]

SLOTS = 16384


class Masters:
    """N independent redis-servers (a Redlock quorum)."""

    def __init__(self, count: int) -> None:
        self.servers = [RedisServer() for _ in range(count)]

    def start(self) -> "Masters":
        for server in self.servers:
            server.start(settle=False)
        for server in self.servers:
            server.settle()
        return self

    @property
    def urls(self) -> List[str]:
        return [server.url for server in self.servers]

    def client(self, index: int) -> redis.Redis:
        return redis.Redis.from_url(self.servers[index].url, decode_responses=True, socket_timeout=2)

    def restart(self, index: int, settle: bool = True) -> None:
        """Start a killed master again, on the same port, empty (``settle``: see RedisServer.settle)."""
        server = self.servers[index]
        server.stop()
        server.start(settle=settle)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
            shutil.rmtree(server._dir, ignore_errors=True)


class LocalCluster:
    """A Redis Cluster of ``masters`` masters (and ``replicas`` replicas each), slots assigned here."""

    def __init__(self, masters: int = 3, replicas: int = 0, node_timeout_ms: int = 1000) -> None:
        self.masters: List[RedisServer] = []
        self.replicas: List[RedisServer] = []
        self._node_timeout_ms = node_timeout_ms
        self._counts = (masters, replicas)
        self._bus: Dict[int, int] = {}

    def _node(self) -> RedisServer:
        bus = free_port()
        server = RedisServer(extra_args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                         "--cluster-node-timeout", str(self._node_timeout_ms),
                                         "--cluster-port", str(bus), "--cluster-replica-validity-factor", "0"])
        self._bus[server.port] = bus
        return server

    def start(self, timeout: float = 20.0) -> "LocalCluster":
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> "LocalCluster":
        masters, replicas = self._counts
        self.masters = [self._node().start(settle=False) for _ in range(masters)]
        self.replicas = [self._node().start(settle=False) for _ in range(masters * replicas)]
        per = SLOTS // masters
        for i, server in enumerate(self.masters):
            last = SLOTS - 1 if i == masters - 1 else (i + 1) * per - 1
            self.node(server).execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, last)
        first = self.masters[0].port
        for server in self.masters[1:] + self.replicas:
            self.node(server).execute_command("CLUSTER", "MEET", "127.0.0.1", first, self._bus[first])
        everyone = self.masters + self.replicas
        wait_for(lambda: all(len(self.node(s).execute_command("CLUSTER", "NODES").splitlines()) == len(everyone)
                             for s in everyone), timeout, interval=0.05, what="every node to know every other")
        for i, server in enumerate(self.replicas):
            master_id = self.node_id(self.masters[i // replicas])
            self.node(server).execute_command("CLUSTER", "REPLICATE", master_id)
        self.wait_ok(timeout)
        for server in self.masters + self.replicas:
            server.settle()
        return self

    def wait_ok(self, timeout: float = 20.0) -> None:
        def ok() -> bool:
            for server in self.masters + self.replicas:
                if server.process is None:
                    continue
                try:
                    info = self.node(server).execute_command("CLUSTER", "INFO")
                except redis.RedisError:
                    return False
                if "cluster_state:ok" not in info:
                    return False
            return True
        wait_for(ok, timeout, interval=0.05, what="cluster_state:ok on every node")

    @staticmethod
    def node(server: RedisServer) -> redis.Redis:
        return redis.Redis(port=server.port, decode_responses=True, socket_timeout=5)

    def node_id(self, server: RedisServer) -> str:
        return self.node(server).execute_command("CLUSTER", "MYID")

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{s.port}" for s in self.masters)

    def owner(self, slot: int) -> RedisServer:
        """The master that serves ``slot`` now."""
        for server in self.masters + self.replicas:
            if server.process is None:
                continue
            try:
                for start, end, primary, *_ in self.node(server).execute_command("CLUSTER", "SLOTS"):
                    if int(start) <= slot <= int(end):
                        port = int(primary[1])
                        return next(s for s in self.masters + self.replicas if s.port == port)
            except redis.RedisError:
                continue
        raise LookupError(f"no node serves slot {slot}")

    def migrate_slot(self, slot: int, target: RedisServer) -> None:
        """Move ``slot`` and its keys to ``target`` the way redis-cli --cluster reshard does."""
        source = self.owner(slot)
        src, dst = self.node(source), self.node(target)
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self.node_id(source))
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", self.node_id(target))
        while True:
            keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not keys:
                break
            src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
        for server in self.masters:
            if server.process is not None:
                self.node(server).execute_command("CLUSTER", "SETSLOT", slot, "NODE", self.node_id(target))

    def stop(self) -> None:
        for server in self.masters + self.replicas:
            server.stop()
            shutil.rmtree(server._dir, ignore_errors=True)


#: No 5 s wait before a diskless full sync; a short ping period so a dead link is noticed.
_REPLICATION_ARGS = ["--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"]


class SentinelGroup:
    """One master, one replica and one sentinel watching them as ``master_name``."""

    master_name = "cslmaster"

    def __init__(self, down_after_ms: int = 500) -> None:
        self.master = RedisServer(extra_args=_REPLICATION_ARGS)
        self.replica: Optional[RedisServer] = None
        self.sentinel_port = free_port()
        self.sentinel: Optional[subprocess.Popen] = None
        self._down_after_ms = down_after_ms
        self._dir = tempfile.mkdtemp(prefix="csl-sentinel-")

    def start(self, timeout: float = 20.0) -> "SentinelGroup":
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> "SentinelGroup":
        self.master.start(settle=False)
        self.replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(self.master.port),
                                               *_REPLICATION_ARGS]).start()
        wait_for(lambda: "master_link_status:up" in _info(self.replica.port, "replication"), timeout,
                 what="the replica to sync")
        wait_for(self._acknowledges, timeout, interval=0.05, what="the replica to acknowledge writes")
        config = os.path.join(self._dir, "sentinel.conf")
        with open(config, "w") as handle:
            handle.write(f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {self._dir}\n"
                         f"sentinel monitor {self.master_name} 127.0.0.1 {self.master.port} 1\n"
                         f"sentinel down-after-milliseconds {self.master_name} {self._down_after_ms}\n"
                         f"sentinel failover-timeout {self.master_name} 2000\n"
                         f"sentinel parallel-syncs {self.master_name} 1\n")
        self.sentinel = subprocess.Popen([redis_server_binary(), config, "--sentinel"], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: reachable(f"redis://127.0.0.1:{self.sentinel_port}"), timeout, what="the sentinel")
        wait_for(self.replica_ready, timeout, interval=0.05, what="the sentinel to see a healthy replica")
        return self

    def _acknowledges(self) -> bool:
        client = redis.Redis(port=self.master.port, socket_timeout=2)
        try:
            client.set("csl-probe", 1)
            acked = client.execute_command("WAIT", 1, 200)
            client.delete("csl-probe")
            return int(acked) >= 1
        finally:
            client.close()

    def replica_ready(self) -> bool:
        """The sentinel sees the replica up and linked: it may be promoted."""
        # redis-py's own parsed forms: the raw replies' shapes differ between its releases.
        replicas = self._sentinel().sentinel_slaves(self.master_name)
        return any(r["is_slave"] and not r["is_sdown"] and r["master-link-status"] == "ok" for r in replicas)

    @property
    def url(self) -> str:
        return f"sentinel://127.0.0.1:{self.sentinel_port}"

    def _sentinel(self) -> redis.Redis:
        return redis.Redis(port=self.sentinel_port, decode_responses=True, socket_timeout=5)

    def master_port(self) -> int:
        host, port = self._sentinel().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
        return int(port)

    def failover(self, timeout: float = 20.0) -> RedisServer:
        """Force a failover to the replica; returns the new master when it serves writes."""
        self._sentinel().execute_command("SENTINEL", "FAILOVER", self.master_name)
        return self.wait_promoted(timeout)

    def wait_promoted(self, timeout: float = 20.0) -> RedisServer:
        """Wait until the sentinel names the replica as master and it answers as one."""
        assert self.replica is not None
        replica = self.replica
        # SENTINEL MASTER (what redis-py's Sentinel reads) switches when the failover ends.
        wait_for(lambda: int(self._sentinel().sentinel_master(self.master_name)["port"])
                 == replica.port and "role:master" in _info(replica.port, "replication"),
                 timeout, interval=0.05, what="the replica to be promoted")
        self.master, self.replica = replica, self.master
        return replica

    def stop(self) -> None:
        if self.sentinel is not None and self.sentinel.poll() is None:
            self.sentinel.kill()
            self.sentinel.wait(10)
        for server in (self.master, self.replica):
            if server is not None:
                server.stop()
                shutil.rmtree(server._dir, ignore_errors=True)
        shutil.rmtree(self._dir, ignore_errors=True)


def _info(port: int, section: str) -> str:
    """``INFO section`` as ``key:value`` lines ("" when the server does not answer)."""
    client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
    try:
        info: Dict[str, object] = client.info(section)
        return "\n".join(f"{k}:{v}" for k, v in info.items())
    except (redis.RedisError, OSError):
        return ""
    finally:
        client.close()
