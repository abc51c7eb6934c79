"""Web search on Chat Completions: OpenAI's search models take `web_search_options` and cite their sources in the
message's `annotations` (`{type: url_citation, url_citation: {url, title, start_index, end_index}}`), streamed in a
delta. The request's `web_search` tool (Responses shape) becomes the options; the citations become flat
url_citation annotations; a cited answer counts one search (the search models search on every call).
https://platform.openai.com/docs/guides/tools-web-search?api-mode=chat"""

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from routing.canonical import CanonicalResponse, HostedTool, OutputMessage, TextAnnotated
from routing.providers.base import as_mapping
from routing.providers.hosted import WEB_SEARCH, capability, citation_within, url_citation

LOCATION_FIELDS = ("city", "region", "country", "timezone")


def tool_problem(tool: dict[str, Any]) -> str | None:
    """Why a hosted tool cannot run on Chat Completions as given (None: it can): web search with a context size
    and an approximate user location, no domain filters."""
    if capability(str(tool.get("type"))) != WEB_SEARCH:
        return f"Chat Completions does not run the {tool.get('type')} tool"
    if extra := sorted(set(tool) - {"type", "search_context_size", "user_location"}):
        return f"Chat Completions' web_search_options have no {extra[0]}"
    if set(as_mapping(tool.get("user_location"))) - {"type", *LOCATION_FIELDS}:
        return "Chat Completions' web search takes a user_location of city, region, country and timezone"
    return None


def options(tools: tuple[HostedTool, ...]) -> dict[str, Any]:
    """`web_search_options` for the request's web_search tool (checked by tool_problem first)."""
    tool = next(t.spec for t in tools if capability(str(t.spec.get("type"))) == WEB_SEARCH)
    found: dict[str, Any] = {}
    if tool.get("search_context_size"):
        found["search_context_size"] = tool["search_context_size"]
    location = {k: v for k, v in as_mapping(tool.get("user_location")).items() if k in LOCATION_FIELDS}
    if location:
        found["user_location"] = {"type": "approximate", "approximate": location}
    return found


def annotation(raw: object) -> dict[str, Any] | None:
    """A message annotation as a flat url_citation (None: not one a client can use: routing.providers.hosted)."""
    citation = as_mapping(as_mapping(raw).get("url_citation"))
    if as_mapping(raw).get("type") != "url_citation":
        return None
    return url_citation(
        citation.get("url"), citation.get("title"), citation.get("start_index"), citation.get("end_index")
    )


def with_citations(response: CanonicalResponse, message: Mapping[str, Any]) -> CanonicalResponse:
    """A parsed answer with its message's citations within its text (and the search they count)."""
    text = message["content"] if isinstance(message.get("content"), str) else ""
    found = tuple(
        a
        for raw in message.get("annotations") or ()
        if (a := annotation(raw)) is not None and citation_within(a, len(text))
    )
    if not found:
        return response
    output = tuple(
        replace(item, annotations=item.annotations + found) if isinstance(item, OutputMessage) else item
        for item in response.output
    )
    return replace(response, output=output, usage=replace(response.usage, web_search_requests=1))


def delta_annotations(delta: Mapping[str, Any]) -> Iterator[TextAnnotated]:
    for raw in delta.get("annotations") or ():
        if (found := annotation(raw)) is not None:
            yield TextAnnotated(found)
