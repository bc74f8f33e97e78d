"""docs/django.md's table of check ids is the check's own: every id the check reports is listed with
the setting it is about, and the table lists no other."""

from __future__ import annotations

import re
from pathlib import Path

from celery_singleton_lock.config.options import SETTING_NAMES
from celery_singleton_lock.contrib.django.checks import CHECK_IDS, IMPORT_ID, SHARED_ID, TASK_ID, UNNAMESPACED_ID

DOC = Path(__file__).resolve().parents[1] / "docs" / "django.md"
ROWS = dict(re.findall(r"^\| `celery_singleton_lock\.([EW]\d{3})` \| (.*) \|$", DOC.read_text(encoding="utf-8"), re.M))


def test_every_setting_has_its_own_id():
    assert set(CHECK_IDS) == {"", *SETTING_NAMES}
    assert len(set(CHECK_IDS.values())) == len(CHECK_IDS)


def test_the_table_lists_every_id_and_no_other():
    assert set(ROWS) == {*CHECK_IDS.values(), TASK_ID, SHARED_ID, UNNAMESPACED_ID, IMPORT_ID}


def test_each_settings_row_names_its_setting_as_django_spells_it():
    for name, check_id in CHECK_IDS.items():
        if name:
            assert f"`CELERY_{name.upper()}`" in ROWS[check_id], (check_id, ROWS[check_id])
