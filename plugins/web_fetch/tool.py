"""The server tool gateway:web_fetch: one page read for the model (plugins.web_fetch.fetch). plugins.registry
registers it; the `web-fetch` plugin entry declares it (plugins.server_tools.stage)."""

from typing import Any

from plugins.common.tools import ToolContext, ToolResult, as_json, new_item_id, use_count
from plugins.web_fetch.fetch import FetchFailed, FetchRefused, fetch
from routing.stages import SERVER_TOOL_RESULT_TOKENS, ServerToolItem


def web_fetch_tool(args: dict[str, Any], parameters: dict[str, Any], tools: ToolContext) -> ToolResult:
    kind = "gateway:web_fetch"
    url = str(args.get("url") or "")[:4096]
    if spent := use_count(tools, kind, parameters):
        return ToolResult.failed(kind, spent, url=url)
    most = SERVER_TOOL_RESULT_TOKENS - 256
    wanted = parameters.get("max_content_tokens")
    try:
        page = fetch(
            url,
            max_content_tokens=min(wanted, most) if isinstance(wanted, int) and wanted > 0 else most,
            allowed_domains=parameters.get("allowed_domains"),
            blocked_domains=parameters.get("blocked_domains"),
        )
    except (FetchRefused, FetchFailed) as error:
        return ToolResult.failed(kind, error.message, url=url)
    tools.sources[page.url] = page.title or page.url
    said = {"url": page.url, "title": page.title, "content": page.text, "truncated": page.truncated}
    item = {
        "type": kind,
        "id": new_item_id(kind),
        "status": "completed",
        "url": page.url,
        "title": page.title,
        "http_status": page.status,
    }
    return ToolResult(for_model=as_json(said), item=ServerToolItem(item=item))
