"""The plugins, registered in one place: the server tools a plugin runs join the server-tool runners
(plugins.tools.RUNNERS) when the app is ready (plugins.apps), so that the server-tool loop never imports the plugins
whose tools it runs (a fusion panel member runs through that loop: importing fusion from it was a cycle)."""

from plugins.fusion.tool import fusion_tool_run
from plugins.tools import Runner, runner_register


def plugins_register() -> None:
    runner_register("gateway:fusion", Runner(fusion_tool_run))
