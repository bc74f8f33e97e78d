"""docker-compose.yml is accepted by Compose (validated without a Docker engine)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _compose_command():
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_config_accepts_the_file():
    command = _compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    done = subprocess.run([*command, "-f", "docker-compose.yml", "config", "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_compose_services_are_the_demo_roles():
    yaml = pytest.importorskip("yaml")
    with open(os.path.join(ROOT, "docker-compose.yml")) as handle:
        services = yaml.safe_load(handle)["services"]
    assert set(services) == {"redis", "worker", "beat", "demo"}
    assert services["worker"]["command"][:3] == ["celery", "-A", "celery_singleton_lock.demo.app"]
