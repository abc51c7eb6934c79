"""Tools OpenAI runs itself (web_search, code_interpreter, image_generation, mcp, file_search): sent as the caller
gave them (the Responses tool shape is ours), their output items passed back, their citations kept.
https://platform.openai.com/docs/guides/tools-web-search  https://platform.openai.com/docs/api-reference/responses"""

import json
from dataclasses import replace
from typing import Any

from routing.canonical import HostedTool, OutputHostedTool, OutputItem, OutputMessage
from routing.providers.base import as_mapping
from routing.providers.hosted import (
    WEB_SEARCH,
    capability,
    citation_within,
    hosted_item,
    searches_bound,
    url_citation,
)

SOURCES = "web_search_call.action.sources"
FILE_ANNOTATIONS = ("file_citation", "container_file_citation", "file_path")  # the SDK's other annotation types
MAX_ANNOTATION_BYTES = 4096  # the pages a search found, on its web_search_call item


def tool_problem(tool: dict[str, Any]) -> str | None:
    """Why OpenAI cannot run a hosted tool as given (None: it can): the Responses shape is its own; its web search
    filters allow domains (each with its subdomains), never block them, and take no paths or wildcards."""
    if capability(str(tool.get("type"))) != WEB_SEARCH:
        return None
    filters = as_mapping(tool.get("filters"))
    if filters.get("blocked_domains"):
        return "OpenAI's web search has no blocked domains"
    if any(not isinstance(d, str) or "/" in d or "*" in d for d in filters.get("allowed_domains") or ()):
        return "OpenAI's web search allows domains without paths or wildcards (a domain covers its subdomains)"
    return None


def tools_body(tools: tuple[HostedTool, ...]) -> list[dict[str, Any]]:
    return [dict(tool.spec) for tool in tools]


def max_tool_calls(tools: tuple[HostedTool, ...]) -> int | None:
    """The cap on the provider's tool calls in one response when it may search the web: the searches the credit hold
    covers (routing.providers.hosted.SEARCHES_PER_CALL; the other hosted tools' calls share it)."""
    return searches_bound(tools) or None


def include(tools: tuple[HostedTool, ...]) -> list[str]:
    """What to ask back: the sources of a web search (the caller sees them; num_search_results counts them)."""
    return [SOURCES] if any(capability(str(tool.spec.get("type"))) == WEB_SEARCH for tool in tools) else []


def annotation(raw: object, offset: int = 0) -> dict[str, Any] | None:
    """An output_text annotation: a url_citation in the flat Responses shape (indices moved by `offset`, the text
    before its part), a file citation or path as it came; None for anything else or a citation no client can use
    (routing.providers.hosted.url_citation)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return None
    if raw["type"] in FILE_ANNOTATIONS:
        return dict(raw) if len(json.dumps(raw)) <= MAX_ANNOTATION_BYTES else None
    if raw["type"] != "url_citation":
        return None
    found = url_citation(raw.get("url"), raw.get("title"), raw.get("start_index"), raw.get("end_index"))
    if found is not None:
        found["start_index"] += offset
        found["end_index"] += offset
    return found


def message_annotations(item: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The annotations of a message item's output_text parts, indexed in the message's whole text (a citation
    beyond its part's text left out)."""
    found: list[dict[str, Any]] = []
    offset = 0
    for part in item.get("content") or []:
        if isinstance(part, dict) and part.get("type") == "output_text":
            text = part["text"] if isinstance(part.get("text"), str) else ""
            found += [
                a
                for raw in part.get("annotations") or []
                if (a := annotation(raw, offset)) is not None and citation_within(a, offset + len(text))
            ]
            offset += len(text)
    return tuple(found)


def with_hosted(item: dict[str, Any], parsed: OutputItem | None) -> OutputItem | None:
    """An output item as parsed, with what a provider-run tool adds: a message's citations, a call it ran."""
    if isinstance(parsed, OutputMessage) and (found := message_annotations(item)):
        return replace(parsed, annotations=parsed.annotations + found)
    return parsed if parsed is not None else hosted_item(item)


def searches(output: tuple[OutputItem, ...]) -> int:
    """The web searches OpenAI ran (each web_search_call that searched is billed)."""
    return sum(
        1
        for item in output
        if isinstance(item, OutputHostedTool)
        and item.item.get("type") == "web_search_call"
        and (item.item.get("action") or {}).get("type", "search") == "search"
    )
