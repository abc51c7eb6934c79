"""The plugins, registered in one place. Each plugin is a folder of its own (below); they never import each other
(an import-linter contract): what they share is in plugins.common, and what one plugin offers another goes through
a registry filled here when the app is ready (plugins.apps): the server tools each plugin runs join the server-tool
runners (plugins.common.tools.RUNNERS, which the server-tool loop reads), and the fusion plugin's stage joins the
routers (plugins.routers.stage.ROUTER_RUNS). Their pipeline stages are listed in the settings
(PIPELINE_PRE_STAGES, PIPELINE_POST_STAGES)."""

from plugins.common.tools import Runner, runner_register
from plugins.fusion.stage import fusion_stage
from plugins.fusion.tool import fusion_tool_run
from plugins.routers.stage import router_register
from plugins.server_tools.tools import datetime_pending, datetime_tool, search_models_tool, tool_search_tool
from plugins.web.tool import web_search_available, web_search_price, web_search_tool
from plugins.web_fetch.tool import web_fetch_tool

# The plugin folders (plugins.<name>), one per plugin id or group of ids.
PLUGINS = (
    "web",  # the `web` plugin and the gateway:web_search tool
    "web_fetch",  # the `web-fetch` plugin's gateway:web_fetch tool
    "file_parser",  # file-parser
    "healing",  # response-healing
    "compression",  # context-compression
    "moderation",  # moderation
    "routers",  # auto-router, auto-beta-router, pareto-router
    "fusion",  # fusion (gateway/fusion) and the gateway:fusion tool
    "server_tools",  # the server-tool loop's stage and the tools every request may use
)


def plugins_register() -> None:
    # In the order the tools are listed to a caller (ServerToolsStage.tool_types).
    runner_register("gateway:datetime", Runner(datetime_tool, pending=datetime_pending))
    runner_register("gateway:search_models", Runner(search_models_tool))
    runner_register("gateway:tool_search", Runner(tool_search_tool))
    runner_register(
        "gateway:web_search", Runner(web_search_tool, available=web_search_available, price=web_search_price)
    )
    runner_register("gateway:web_fetch", Runner(web_fetch_tool))
    runner_register("gateway:fusion", Runner(fusion_tool_run))
    router_register("fusion", fusion_stage)
