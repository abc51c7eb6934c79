"""Test overrides: fast hashing, a deterministic keyring, no throttle unless a test sets one."""

import os

# A fixed key of the tests' own (base.py refuses to start without one while DEBUG is off), set in the environment
# so that the server processes tests start (gunicorn, manage.py) have it too.
if not os.environ.get("SECRET_KEY", "").strip():
    os.environ["SECRET_KEY"] = "test-only-secret-key-not-for-deployment-" + "5Zq8kX2vL9mN4wR7tY1u"

import re  # noqa: E402

from .base import *  # noqa: E402, F403
from .base import DATABASES, INSTALLED_APPS  # noqa: E402

# The local stand-in provider the tests route to (tests/conftest.py), as under `make run` (gateway/settings/dev.py).
INSTALLED_APPS = [*INSTALLED_APPS, "routing.standin"]

HEALTH_WRITE_BEHIND = False  # tests read what they just recorded (tests/routing/test_health.py covers it on)
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
GATEWAY_ENCRYPTION_KEYS = "test1:" + "A" * 43 + "="
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file (not :memory:) so that server processes started by live tests share it.
    DATABASES["default"]["TEST"] = {"NAME": str(DATABASES["default"]["NAME"]) + ".test"}
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # Creating, migrating and dropping the test database on a loaded CI machine can outlast the 5 s statement deadline
    # of a request: the tests' own connections get a generous one. Servers that tests start read base.py's (the live
    # outage tests rely on it).
    _options = DATABASES["default"]["OPTIONS"]
    _options["options"] = re.sub(r"statement_timeout=\d+", "statement_timeout=60000", _options["options"])
