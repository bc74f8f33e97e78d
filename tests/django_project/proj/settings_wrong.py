"""The project's settings with lock settings wrong: CSL_WRONG_SETTING=NAME and CSL_WRONG_VALUE=JSON for one,
CSL_WRONG_SETTINGS={NAME: VALUE, ...} (JSON) for several; CSL_CLASH=1 installs the app whose tasks are refused."""
import json
import os

from .settings import *  # noqa: F401,F403

if os.environ.get("CSL_WRONG_SETTING"):
    globals()[os.environ["CSL_WRONG_SETTING"]] = json.loads(os.environ["CSL_WRONG_VALUE"])
globals().update(json.loads(os.environ.get("CSL_WRONG_SETTINGS", "{}")))
if os.environ.get("CSL_CLASH"):
    INSTALLED_APPS = [*INSTALLED_APPS, "clash"]  # noqa: F405
