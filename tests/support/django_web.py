"""tests/django_project with the admin and the locks page (``proj.settings_web``), served by a real
``manage.py runserver``; users made with ``manage.py shell``; a browser-like client that logs in."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, Optional, Tuple

from tests.support.servers import free_port

__all__ = ["DjangoSite", "Client", "PASSWORD"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROJECT = os.path.join(_ROOT, "tests", "django_project")
SETTINGS = "proj.settings_web"
PASSWORD = "pw-of-the-test-users-3b"

#: The users the tests log in as: (name, is_staff, is_superuser, may release).
USERS = (("anna", True, False, False), ("rita", True, False, True), ("sam", True, True, False),
         ("nils", False, False, False))

_MAKE_USERS = """
from django.contrib.auth.models import Permission, User
release = Permission.objects.get(codename="release_lock", content_type__app_label="celery_singleton_lock")
for name, staff, superuser, may in {users!r}:
    user = User.objects.create_user(name, password={password!r}, is_staff=staff, is_superuser=superuser)
    if may:
        user.user_permissions.add(release)
"""


class DjangoSite:
    """A migrated SQLite file, the users, and ``runserver`` on a free port."""

    def __init__(self, env: Dict[str, str], database: str) -> None:
        self.env = dict(env, CSL_DJANGO_DB=database, DJANGO_SETTINGS_MODULE=SETTINGS,
                        BROKER_REDIS_URL=env["CSL_BROKER_URL"], LOCK_REDIS_URL=env["CSL_LOCK_URL"],
                        PYTHONPATH=os.pathsep.join(filter(None, [PROJECT, _ROOT, os.environ.get("PYTHONPATH")])))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.process: Optional[subprocess.Popen] = None
        self.log_path = tempfile.mktemp(prefix="csl-django-web-", suffix=".log")

    def manage(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=dict(os.environ, **self.env),
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise AssertionError(f"manage.py {' '.join(args)}: {done.stdout}\n{done.stderr}")
        return done.stdout

    def start(self) -> "DjangoSite":
        self.manage("migrate", "-v0")
        self.manage("shell", "-c", _MAKE_USERS.format(users=USERS, password=PASSWORD))
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload", "--skip-checks"],
            cwd=PROJECT, env=dict(os.environ, **self.env), stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + 60
        while not self._listening():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"runserver did not start:\n{self.log()}")
            time.sleep(0.1)
        return self

    def _listening(self) -> bool:
        try:
            urllib.request.urlopen(self.url + "admin/login/", timeout=2).close()
            return True
        except (urllib.error.URLError, OSError):
            return False

    def log(self) -> str:
        with open(self.log_path, "r", errors="replace") as handle:
            return handle.read()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(10)
        if getattr(self, "_log", None):
            self._log.close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # a redirect is an answer the tests look at
        return None


class Client:
    """Cookies kept, redirects not followed: what a browser holds, without running the page."""

    def __init__(self, site: DjangoSite) -> None:
        self.site = site
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect)

    def request(self, path: str, data: Optional[bytes] = None,
                headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], str]:
        request = urllib.request.Request(self.site.url + path, data=data, headers=headers or {})
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode()

    def cookie(self, name: str) -> str:
        return next((c.value for c in self.jar if c.name == name), "")

    def login(self, user: str) -> "Client":
        _, _, page = self.request("admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        form = urllib.parse.urlencode({"username": user, "password": PASSWORD, "csrfmiddlewaretoken": token,
                                       "next": "/admin/"}).encode()
        status, headers, _ = self.request("admin/login/", form, {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 302 and headers["Location"] == "/admin/", f"{user} could not log in ({status})"
        return self

    def release(self, key: str, force: bool = False, csrf: bool = True) -> Tuple[int, str]:
        headers = {"Content-Type": "application/json"}
        if csrf:
            headers["X-CSRFToken"] = self.cookie("csrftoken")
        status, _, body = self.request("locks/api/release", json.dumps({"key": key, "force": force}).encode(), headers)
        return status, body


