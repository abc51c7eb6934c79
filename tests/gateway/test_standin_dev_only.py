"""The local stand-in provider (routing/standin/) is a development and test app: `make run` (gateway/settings/dev.py)
and the tests install it, the production settings, the image and compose do not. (pyproject.toml's import-linter
contract keeps production modules from importing it.)"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STANDIN_APP = "routing.standin"


def manage(settings: str, *args: str) -> subprocess.CompletedProcess:
    """manage.py in a fresh process under these settings, with no .env and a key of its own."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings, "GATEWAY_ENV_FILE": ""}
    env["SECRET_KEY"] = "standin-dev-only-test-key-" + "Zq8kX2vL9mN4wR7tY1uI5oP3aS6dF0gH"
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_production_settings_do_not_install_the_standin():
    # Given the production settings, loaded as manage.py and gunicorn load them
    result = manage(
        "gateway.settings.base",
        "shell",
        "-c",
        f"from django.apps import apps; from django.core.management import get_commands; "
        f"print('installed:', apps.is_installed('{STANDIN_APP}'), 'standin_provider' in get_commands())",
    )

    # Then neither the stand-in's app nor its command is there
    assert result.returncode == 0, result.stderr
    assert "installed: False False" in result.stdout


def test_the_development_settings_run_the_standin_command():
    # Given `make run`'s settings
    result = manage("gateway.settings.dev", "help", "standin_provider")

    # Then its command is there
    assert result.returncode == 0, result.stderr
    assert "--interval-ms" in result.stdout


def test_the_test_settings_install_the_standin():
    from django.apps import apps

    assert apps.is_installed(STANDIN_APP)


def test_make_run_uses_the_development_settings_and_the_image_and_compose_do_not():
    run_sh = (ROOT / "scripts" / "run.sh").read_text()
    assert "export DJANGO_SETTINGS_MODULE=gateway.settings.dev\n" in run_sh
    for shipped in ("Dockerfile", "compose.yaml"):
        text = (ROOT / shipped).read_text()
        assert "settings.dev" not in text and "standin" not in text, shipped
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert {"routing/standin", "routing/catalog/standin.yaml", "gateway/settings/dev.py"} <= set(ignored)
