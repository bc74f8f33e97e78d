"""The web view in a real headless browser (Debian's ``chromium`` and ``chromedriver``, driven by selenium).

Given real prefork workers holding locks, when the standalone page (``celery locks web``) and the Django
mount are open in Chromium, then a lock appears within 2 s of its grant and leaves within 2 s of its
release (both timed by the page itself, from the worker's own start and end records or from the key in
Redis), the Release button releases where it is allowed (and the next call then runs) and is absent
where it is not, a hostile argument shows as text: no element of it is in the page, and a lock name
whose locks are gone keeps its timeline.

Set ``CSL_WEB_SCREENSHOTS`` to a directory to keep the pages' screenshots (docs/ holds the ones docs/web.md shows).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from typing import Iterator

import pytest
import redis

from tests.integration.helpers import records, wait_started
from tests.support.django_web import PASSWORD, DjangoSite
from tests.support.waits import wait_for
from tests.support.web import WebServer
from tests.support.workers import Worker

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
HOSTILE = "<img src=x onerror=pwn()><script>"
#: The page's promise: a lock shows (or goes) within this many seconds of its grant (or release).
PROMPT = 2.0

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra has it)")
if not (shutil.which(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip(f"no headless browser: {CHROMIUM} and {CHROMEDRIVER} come with Debian's chromium and "
                "chromium-driver packages (.ci/run installs them)", allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.expected_conditions import alert_is_present  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

#: Installed in the page: when each row (by key) was first seen and last seen, by the page's clock.
WATCH = """
window.__seen = window.__seen || {};
window.__gone = window.__gone || {};
if (!window.__watch) {
  window.__watch = new MutationObserver(function () {
    var now = Date.now(), here = {};
    document.querySelectorAll("tr[data-key]").forEach(function (tr) {
      here[tr.dataset.key] = true;
      if (!(tr.dataset.key in window.__seen)) window.__seen[tr.dataset.key] = now;
    });
    Object.keys(window.__seen).forEach(function (k) { if (!here[k] && !(k in window.__gone)) window.__gone[k] = now; });
  });
  window.__watch.observe(document.body, {childList: true, subtree: true});
}
"""


@pytest.fixture
def browser() -> Iterator[object]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _screenshot(driver, name: str) -> None:
    folder = os.environ.get("CSL_WEB_SCREENSHOTS")
    if folder:
        driver.save_screenshot(os.path.join(folder, name))


def _row_key(driver, part: str, timeout: float = 20.0) -> str:
    """The key of the row whose key contains ``part``, once the page shows it."""
    def found():
        for row in driver.find_elements(By.CSS_SELECTOR, "tr[data-key]"):
            if part in row.get_attribute("data-key"):
                return row.get_attribute("data-key")
        return None
    return wait_for(found, timeout, interval=0.05, what=f"a row for {part}")


def _seen(driver, key: str, which: str = "__seen") -> float:
    """When the page saw ``key`` appear (or go), in seconds since the epoch."""
    return wait_for(lambda: driver.execute_script(f"return window.{which}[arguments[0]] || null", key), 20,
                    interval=0.05, what=f"the page's record of {key}") / 1000


def _release_with_the_button(driver, key: str) -> float:
    button = driver.find_element(By.CSS_SELECTOR, f'tr[data-key="{key}"] button.release')
    button.click()
    WebDriverWait(driver, 10).until(alert_is_present()).accept()  # "Release the lock ...?"
    WebDriverWait(driver, 10).until(alert_is_present()).accept()  # its holder still runs: force
    return time.time()


def _no_injected_element(driver) -> None:
    assert driver.execute_script("return typeof window.pwn") == "undefined"
    assert driver.find_elements(By.CSS_SELECTOR, "main img, main script, img[src='x']") == []
    assert len(driver.find_elements(By.TAG_NAME, "script")) == 3  # the page's own


def test_the_standalone_page_in_a_browser(proj, start_worker, events_redis, test_env, browser):
    start_worker(app="tests.integration.proj_describe", concurrency=3)
    with WebServer("tests.integration.proj_describe", test_env, ["--allow-release"]) as web:
        browser.get(web.url)
        WebDriverWait(browser, 10).until(lambda d: "updated" in d.find_element(By.ID, "status").text)
        browser.execute_script(WATCH)

        held = proj.long_running.delay("by-button", duration=30)
        hostile = proj.sync.delay(HOSTILE, duration=6.0)
        started = {s["id"]: s["start"] for s in wait_started(events_redis, 2)}
        key = _row_key(browser, "long_running")
        assert _seen(browser, key) - started[held.id] <= PROMPT
        hostile_key = _row_key(browser, "proj.sync")
        assert _seen(browser, hostile_key) - started[hostile.id] <= PROMPT
        assert HOSTILE in browser.find_element(By.CSS_SELECTOR, f'tr[data-key="{hostile_key}"] td.call').text
        _no_injected_element(browser)
        _screenshot(browser, "web-standalone.png")

        clicked = _release_with_the_button(browser, key)
        assert _seen(browser, key, "__gone") - clicked <= PROMPT
        assert "cleared" in browser.find_element(By.ID, "message").text
        assert proj.long_running.delay("by-button", duration=0.2).get(timeout=30)["key"] == "by-button"

        hostile.get(timeout=30)
        ended = next(r["end"] for r in records(events_redis) if r["id"] == hostile.id)
        assert _seen(browser, hostile_key, "__gone") - ended <= PROMPT
        _no_injected_element(browser)
        # its lock is gone, its timeline stays: the hold as a bar on its key's row
        timeline = 'section.group[data-name="tests.integration.proj.sync"] svg'
        assert browser.find_elements(By.CSS_SELECTOR, f"{timeline} rect.tl-hold")
        assert hostile_key in [t.get_attribute("textContent") for t in
                               browser.find_elements(By.CSS_SELECTOR, f"{timeline} text.tl-key title")]
    held.revoke(terminate=True)


def test_the_standalone_page_without_release_has_no_button(proj, start_worker, events_redis, test_env, browser):
    start_worker(concurrency=1)
    held = proj.long_running.delay("no-button", duration=30)
    wait_started(events_redis, 1)
    with WebServer("tests.integration.proj", test_env) as web:
        browser.get(web.url)
        key = _row_key(browser, "long_running")
        assert browser.find_elements(By.CSS_SELECTOR, "button.release") == []
        browser.get(web.url + "lock?key=" + key.replace("{", "%7B").replace("}", "%7D"))
        WebDriverWait(browser, 10).until(lambda d: "fencing token" in d.find_element(By.ID, "lock-facts").text)
        assert browser.find_elements(By.CSS_SELECTOR, "button.release") == []
    held.revoke(terminate=True)


@pytest.fixture
def django_site(test_env, suite_servers, tmp_path) -> Iterator[DjangoSite]:
    suite_servers.clean()
    site = DjangoSite(test_env, str(tmp_path / "db.sqlite3"))
    worker = Worker("proj", site.env, name=f"django-web-{uuid.uuid4().hex[:6]}", pool="prefork", concurrency=2)
    try:
        site.start()
        worker.start()
        yield site
    finally:
        worker.stop()
        site.stop()


def _log_in(driver, site: DjangoSite, user: str) -> None:
    driver.get(site.url + "admin/login/?next=/locks/")
    driver.find_element(By.NAME, "username").send_keys(user)
    driver.find_element(By.NAME, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "input[type=submit], button[type=submit]").click()
    WebDriverWait(driver, 10).until(lambda d: "updated" in d.find_element(By.ID, "status").text)


def _publish(site: DjangoSite, order_id: object) -> None:
    """shop.tasks.sync_order, published by name as any producer of the project's broker does."""
    from celery import Celery

    app = Celery("producer", broker=site.env["CSL_BROKER_URL"])
    try:
        app.send_task("shop.tasks.sync_order", args=[order_id], kwargs={"duration": 30})
    finally:
        app.close()


def _granted(lock: redis.Redis, part: str) -> tuple:
    """The lock key once Redis holds it, and when this test saw it (polled every 10 ms)."""
    key = wait_for(lambda: next((k for k in lock.scan_iter("*sync_order*") if part in k or True), None), 30,
                   interval=0.01, what="the lock in Redis")
    return key, time.time()


def test_the_django_mount_in_a_browser(django_site, test_env, browser):
    lock = redis.Redis.from_url(test_env["CSL_LOCK_URL"], decode_responses=True)
    _log_in(browser, django_site, "rita")  # may release
    browser.execute_script(WATCH)
    _publish(django_site, HOSTILE)
    key, granted = _granted(lock, "sync_order")
    assert _row_key(browser, "sync_order") == key
    assert _seen(browser, key) - granted <= PROMPT
    _no_injected_element(browser)
    assert browser.find_element(By.CSS_SELECTOR, "#back a").text == "Django admin"
    _screenshot(browser, "web-django.png")

    clicked = _release_with_the_button(browser, key)
    assert _seen(browser, key, "__gone") - clicked <= PROMPT
    assert "cleared" in browser.find_element(By.ID, "message").text
    _publish(django_site, HOSTILE)  # the next call of the key runs: it takes the lock
    wait_for(lambda: lock.get(key) is not None, 30, interval=0.05, what="the next call to take the lock")

    browser.delete_all_cookies()
    _log_in(browser, django_site, "anna")  # staff, without the permission
    _row_key(browser, "sync_order")
    assert browser.find_elements(By.CSS_SELECTOR, "button.release") == []
    lock.close()
