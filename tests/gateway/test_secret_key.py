"""SECRET_KEY: with DEBUG off the gateway refuses to start without one of its own (unset, empty, or a known
placeholder such as the former hard-coded default), rather than signing sessions and hashing end-user ids with
a key anyone can read in the source. DEBUG on (local development) keeps a development default.

The settings read a .env file (BASE_DIR/.env, where compose.yaml has operators put SECRET_KEY; GATEWAY_ENV_FILE names
another, empty for none): these tests load them with none, so a checkout's .env cannot make them pass or fail."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOOD_KEY = "Zq8kX2vL9mN4wR7tY1uI5oP3aS6dF0gH" + "x7Pq2Lm9Vb4Nc8"
# The settings module loaded on its own, as gunicorn and manage.py load it (with the environment's DEBUG).
LOAD = "import gateway.settings.base as s; print('loaded', s.DEBUG, len(s.SECRET_KEY))"


def load_settings(root: Path = ROOT, env_file: str | None = "", **variables: str | None) -> subprocess.CompletedProcess:
    """The settings of the checkout at `root` loaded in a fresh process, with the environment's SECRET_KEY and DEBUG
    replaced by `variables` (None: unset), reading `env_file` (GATEWAY_ENV_FILE; "": none; None: the default)."""
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG", "DJANGO_SETTINGS_MODULE")}
    env.pop("GATEWAY_ENV_FILE", None)
    if env_file is not None:
        env["GATEWAY_ENV_FILE"] = env_file
    if root != ROOT:
        env.pop("DATABASE_URL", None)  # a scratch checkout holds the settings alone (no database pool module)
    env.update({name: value for name, value in variables.items() if value is not None})
    return subprocess.run([sys.executable, "-c", LOAD], cwd=root, env=env, capture_output=True, text=True, timeout=60)


def refused(result: subprocess.CompletedProcess) -> bool:
    return result.returncode != 0 and "loaded" not in result.stdout and "ImproperlyConfigured" in result.stderr


def checkout_with_env_file(directory: Path, content: str) -> Path:
    """A scratch checkout of the settings (gateway/settings/base.py and its packages) with this .env next to them."""
    for relative in ("gateway/__init__.py", "gateway/settings/__init__.py", "gateway/settings/base.py"):
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / relative, directory / relative)
    (directory / ".env").write_text(content)
    return directory


@pytest.mark.parametrize(
    "key",
    [None, "", "   ", "change-me", "dev-only-insecure-secret-key-change-me-0123456789"],
    ids=["unset", "empty", "blank", "placeholder", "former-default"],
)
def test_without_a_real_key_and_debug_off_the_settings_refuse_to_load(key):
    result = load_settings(SECRET_KEY=key, DEBUG="false")
    assert result.returncode != 0 and "loaded" not in result.stdout
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY" in result.stderr and "DEBUG" in result.stderr  # what to set, in the message


def test_debug_off_is_the_default_so_an_unset_key_is_refused_without_debug_set():
    result = load_settings(SECRET_KEY=None, DEBUG=None)
    assert result.returncode != 0 and "ImproperlyConfigured" in result.stderr


def test_a_real_key_loads_and_debug_keeps_a_development_default():
    assert load_settings(SECRET_KEY=GOOD_KEY, DEBUG="false").stdout.strip() == f"loaded False {len(GOOD_KEY)}"
    debug = load_settings(SECRET_KEY=None, DEBUG="true")
    assert debug.returncode == 0 and debug.stdout.startswith("loaded True"), debug.stderr


def test_the_test_settings_bring_a_key_of_their_own_that_servers_they_start_inherit():
    from django.conf import settings

    from gateway.settings.base import PLACEHOLDER_SECRET_KEYS

    assert settings.SECRET_KEY.strip().lower() not in PLACEHOLDER_SECRET_KEYS
    assert os.environ["SECRET_KEY"] == settings.SECRET_KEY


def test_a_env_file_in_the_checkout_is_read_but_cannot_decide_these_tests(tmp_path):
    # Given a checkout whose .env holds a real SECRET_KEY, as compose.yaml tells operators to do
    root = checkout_with_env_file(tmp_path / "checkout", f"SECRET_KEY={GOOD_KEY}\n")
    # Then the settings started as usual read it
    started = load_settings(root, env_file=None, SECRET_KEY=None, DEBUG="false")
    assert started.stdout.strip() == f"loaded False {len(GOOD_KEY)}", started.stderr
    # And loaded as these tests load them, they do not: no key and the former default are refused there too
    assert refused(load_settings(root, SECRET_KEY=None, DEBUG=None))
    assert refused(load_settings(root, SECRET_KEY="dev-only-insecure-secret-key-change-me-0123456789", DEBUG="false"))
    # And GATEWAY_ENV_FILE names the file to read instead
    other = tmp_path / "elsewhere.env"
    other.write_text(f"SECRET_KEY={GOOD_KEY}more\nDEBUG=false\n")
    assert load_settings(root, env_file=str(other)).stdout.strip() == f"loaded False {len(GOOD_KEY) + 4}"
