"""Test overrides: fast hashing, a deterministic keyring, no throttle unless a test sets one."""

from .base import *  # noqa: F403
from .base import DATABASES

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
