"""The plugins' registry (plugins/registry.py): every plugin folder is listed there and in the import-linter
contracts that keep the plugins independent of each other, and what one plugin offers another (server tools, the
fusion router) is registered once the app is ready."""

import tomllib
from pathlib import Path

from plugins import registry
from plugins.common.tools import RUNNERS
from plugins.fusion.stage import fusion_stage
from plugins.routers.stage import ROUTER_RUNS

PLUGINS_DIR = Path(registry.__file__).parent
NOT_PLUGINS = {"common", "migrations"}  # shared parts and the app's migrations


def _contracts() -> dict[str, dict]:
    pyproject = tomllib.loads((PLUGINS_DIR.parent / "pyproject.toml").read_text())
    return {contract["name"]: contract for contract in pyproject["tool"]["importlinter"]["contracts"]}


def test_every_plugin_folder_is_in_the_registry():
    folders = {path.parent.name for path in PLUGINS_DIR.glob("*/__init__.py")} - NOT_PLUGINS
    assert folders == set(registry.PLUGINS)


def test_the_contracts_keep_every_registered_plugin_independent():
    contracts = _contracts()
    listed = [f"plugins.{name}" for name in registry.PLUGINS]
    assert contracts["Plugins are independent of each other"]["modules"] == listed
    layers = contracts["plugins: the registry -> the plugins -> plugins.common"]["layers"]
    assert layers == ["plugins.registry", " | ".join(listed), "plugins.common"]


def test_the_plugins_tools_and_the_fusion_router_are_registered_when_the_app_is_ready():
    assert list(RUNNERS) == [
        "gateway:datetime",
        "gateway:search_models",
        "gateway:tool_search",
        "gateway:web_search",
        "gateway:web_fetch",
        "gateway:fusion",
    ]
    assert RUNNERS["gateway:web_search"].price is not None  # held with the request (ServerToolsStage.hold)
    assert ROUTER_RUNS == {"fusion": fusion_stage}
