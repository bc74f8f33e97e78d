"""The project's settings with one lock setting wrong: CSL_WRONG_SETTING=NAME, CSL_WRONG_VALUE=JSON."""
import json
import os

from .settings import *  # noqa: F401,F403

globals()[os.environ["CSL_WRONG_SETTING"]] = json.loads(os.environ["CSL_WRONG_VALUE"])
