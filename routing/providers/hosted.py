"""Tools the provider runs itself ("hosted" tools: web search, code interpreter, image generation, MCP, file
search): their vocabulary, shared by the catalog (an endpoint's `hosted_tools`), the request pipeline (which
endpoints a request naming one may route to) and the adapters that pass them through.

A request names them in the Responses tool shape (https://platform.openai.com/docs/api-reference/responses/create
`tools`); the OpenAI Responses adapter sends them as they are, the Anthropic adapter translates web search to its
`web_search_20250305` server tool, the Chat Completions adapter to `web_search_options`. Tools whose calls the
caller must answer itself (computer use, local shell, shell, apply patch) are not among them: this gateway cannot
carry their results back, so they stay refused."""

import json
import re
from typing import Any

from routing.canonical import HostedTool, OutputHostedTool

WEB_SEARCH, CODE_INTERPRETER, IMAGE_GENERATION, MCP, FILE_SEARCH = (
    "web_search",
    "code_interpreter",
    "image_generation",
    "mcp",
    "file_search",
)
CAPABILITIES = (WEB_SEARCH, CODE_INTERPRETER, IMAGE_GENERATION, MCP, FILE_SEARCH)
# A request's tool type -> the catalog capability an endpoint must list to run it.
TOOL_CAPABILITY = {
    "web_search": WEB_SEARCH,
    "web_search_2025_08_26": WEB_SEARCH,
    "web_search_preview": WEB_SEARCH,
    "web_search_preview_2025_03_11": WEB_SEARCH,
    "code_interpreter": CODE_INTERPRETER,
    "image_generation": IMAGE_GENERATION,
    "mcp": MCP,
    "file_search": FILE_SEARCH,
}
MAX_TOOL_BYTES = 16 * 1024  # one tool's definition, as JSON: a definition is configuration, not a document
MAX_DOMAINS = 100  # allowed or blocked domains of a web search (OpenAI and Anthropic take lists of domain names)
CONTEXT_SIZES = ("low", "medium", "high")
# The most web searches one model call may make: sent to the provider (Anthropic's max_uses, OpenAI's max_tool_calls;
# a Chat Completions search model searches once), held at the endpoint's web_search price and the most billed.
SEARCHES_PER_CALL = 10

URL_SCHEME = re.compile(r"https?://", re.IGNORECASE)
MAX_CITATION_URL = 4096
MAX_CITATION_TITLE = 1000

# The output items a provider returns for the calls it ran, and the stream events between their added and done.
ITEM_PROGRESS = {
    "web_search_call": ("in_progress", "searching", "completed"),
    "code_interpreter_call": ("in_progress", "interpreting", "completed"),
    "image_generation_call": ("in_progress", "generating", "completed"),
    "file_search_call": ("in_progress", "searching", "completed"),
    "mcp_call": ("in_progress", "completed"),
    "mcp_list_tools": ("in_progress", "completed"),
    "mcp_approval_request": (),
}


def capability(tool_type: str) -> str:
    """The catalog capability a tool type needs ("" for a type no provider runs here)."""
    return TOOL_CAPABILITY.get(tool_type, "")


def hosted_tools(tools: list[dict[str, Any]]) -> tuple[HostedTool, ...]:
    """A request's tools that a provider runs (responses_api.stages refuses the ones not fit to pass on), as the
    canonical request carries them."""
    return tuple(
        HostedTool(spec=dict(tool), source=f"tools[{index}]")
        for index, tool in enumerate(tools)
        if capability(str(tool.get("type")))
    )


def searches_bound(tools: tuple[HostedTool, ...]) -> int:
    """The most provider-run web searches one call with these tools may make (and be billed for)."""
    return SEARCHES_PER_CALL if any(capability(str(tool.spec.get("type"))) == WEB_SEARCH for tool in tools) else 0


def tool_problem(tool: dict[str, Any]) -> str | None:
    """Why a hosted tool's definition cannot be passed on (None: it can): a known type, a bounded size, and a web
    search's options in their documented shape (the adapters translate them: a string where a list belongs would
    reach Anthropic as a list of characters, a location that is no object would be dropped)."""
    if not capability(str(tool.get("type"))):
        return f"the tool type '{tool.get('type')}' is not run by any provider of this gateway"
    if len(json.dumps(tool, separators=(",", ":"))) > MAX_TOOL_BYTES:
        return f"the {tool['type']} tool's definition is longer than {MAX_TOOL_BYTES} bytes"
    if capability(str(tool["type"])) == WEB_SEARCH:
        return web_search_problem(tool)
    return None


def web_search_problem(tool: dict[str, Any]) -> str | None:
    """A web_search tool's filters, user_location and search_context_size checked against the Responses shape
    (https://platform.openai.com/docs/api-reference/responses/create: tools, web search)."""
    filters = tool.get("filters")
    if filters is not None:
        if not isinstance(filters, dict):
            return "the web_search tool's filters must be an object"
        for name in ("allowed_domains", "blocked_domains"):
            domains = filters.get(name)
            if domains is not None and (
                not isinstance(domains, list)
                or len(domains) > MAX_DOMAINS
                or not all(isinstance(d, str) and 0 < len(d) <= 253 for d in domains)
            ):
                return f"the web_search tool's filters.{name} must be a list of at most {MAX_DOMAINS} domain names"
    location = tool.get("user_location")
    if location is not None and (
        not isinstance(location, dict) or not all(isinstance(v, str) and len(v) <= 200 for v in location.values())
    ):
        return "the web_search tool's user_location must be an object of strings (city, region, country, timezone)"
    size = tool.get("search_context_size")
    if size is not None and size not in CONTEXT_SIZES:
        return f"the web_search tool's search_context_size must be one of {', '.join(CONTEXT_SIZES)}"
    return None


def url_citation(url: object, title: object, start: object, end: object) -> dict[str, Any] | None:
    """A provider's citation in the flat Responses shape, or None when it is not one a client can use: indices that
    are integers with 0 <= start <= end, an http(s) URL (never javascript: and the like), bounded text."""
    if type(start) is not int or type(end) is not int or not 0 <= start <= end:
        return None
    if not isinstance(url, str) or len(url) > MAX_CITATION_URL or not URL_SCHEME.match(url):
        return None
    title = title[:MAX_CITATION_TITLE] if isinstance(title, str) else url
    return {"type": "url_citation", "url": url, "title": title, "start_index": start, "end_index": end}


def citation_within(annotation: dict[str, Any], length: int) -> bool:
    """Whether a url_citation's span lies within a text of `length` characters (other annotations: yes)."""
    return annotation.get("type") != "url_citation" or annotation["end_index"] <= length


def hosted_item(item: dict[str, Any]) -> OutputHostedTool | None:
    """A provider's output item for a call it ran, as passed back to the caller (None: not such an item)."""
    kind = item.get("type")
    if not isinstance(kind, str) or kind not in ITEM_PROGRESS or not isinstance(item.get("id"), str):
        return None
    return OutputHostedTool(item=dict(item), progress=tuple(f"response.{kind}.{step}" for step in ITEM_PROGRESS[kind]))
