"""What one run starts: the infrastructure redis-server, the lock store(s), the workers.

The infrastructure server holds the broker (db 0, unless RabbitMQ), the result backend
(db 1), the history (db 2) and the downstream store (db 3). The lock store is a
redis-server of its own (or three, a quorum), so a nemesis can pause, restart or cut
it without touching the rest. Nothing is kept on disk: a restart comes back empty.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from typing import Any, Dict, List

from tests.support.servers import RedisServer  # the test suite's own server and worker helpers
from tests.support.workers import Worker

from .plan import AMQP_URL, Fault, Size

__all__ = ["Topology"]


class Topology:
    def __init__(self, fault: Fault, size: Size) -> None:
        self.fault = fault
        self.size = size
        self.infra = RedisServer()
        self.locks = [RedisServer() for _ in range(fault.quorum)]
        self.workers: List[Worker] = []
        self.logs: List[str] = []  # every worker's log, the killed ones' too
        self.queue = f"faults-{fault.name}-{uuid.uuid4().hex[:8]}"
        self.mutex = threading.Lock()  # nemesis and runner never restart the same thing at once
        self._generation = 0
        self.publishers: Any = None  # the latest-wins rows' publisher processes (publisher.Publishers)

    # -- servers ------------------------------------------------------------------------------
    def start_servers(self) -> "Topology":
        self.infra.start()
        for server in self.locks:
            server.start()
        return self

    def url(self, db: int) -> str:
        return f"{self.infra.url}/{db}"

    @property
    def lock_urls(self) -> List[str]:
        return [f"{server.url}/0" for server in self.locks]

    def config(self) -> Dict[str, object]:
        broker = AMQP_URL if self.fault.broker == "amqp" else self.url(0)
        locks = self.lock_urls
        return {"broker": broker, "results": self.url(1), "history": self.url(2), "downstream": self.url(3),
                "lock": locks if len(locks) > 1 else locks[0], "queue": self.queue,
                "visibility_timeout": self.fault.visibility_timeout, "body": list(self.fault.body),
                "mid_write": self.fault.mid_write, "limit": self.fault.limit, "window": self.fault.window,
                "shared": self.fault.shared}

    def environment(self) -> Dict[str, str]:
        return {"FAULTS_CONFIG": json.dumps(self.config())}

    def restart_lock_store(self, index: int = 0, down: float = 0.0) -> None:
        """Kill a lock server and start it again on its port, empty, without waiting for it to settle."""
        server = self.locks[index]
        server.stop()
        time.sleep(down)
        server.start(settle=False)

    # -- workers ------------------------------------------------------------------------------
    def start_worker(self) -> Worker:
        self._generation += 1
        worker = Worker(self.fault.app_module, self.environment(), name=f"faults{self._generation}",
                        pool="prefork", concurrency=self.size.concurrency, extra_args=["-Q", self.queue])
        self.logs.append(worker.log_path)
        worker.start()
        self.workers.append(worker)
        return worker

    def start_workers(self) -> None:
        for _ in range(self.size.workers):
            self.start_worker()

    def kill_worker(self, worker: Worker) -> None:
        """SIGKILL a worker's whole process group (no warm shutdown, nothing released)."""
        self.workers.remove(worker)
        worker.kill()

    def signal_worker(self, worker: Worker, signum: int) -> None:
        try:
            os.killpg(worker.pid, signum)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        for worker in list(self.workers):
            self.signal_worker(worker, signal.SIGCONT)
            worker.stop()
        self.workers.clear()
        for server in [self.infra, *self.locks]:
            server.__exit__()


    @staticmethod
    def signal_worker_child(pid: int, signum: int) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
