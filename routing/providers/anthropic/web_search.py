"""Anthropic's own web search: the request's `web_search` tool (Responses shape) as Anthropic's server tool, and
its answer's `server_tool_use` / `web_search_tool_result` blocks as web_search_call items, its text citations
(`web_search_result_location`) as url_citation annotations, `usage.server_tool_use.web_search_requests` billed.
https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool"""

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from routing.canonical import (
    CanonicalResponse,
    HostedTool,
    HostedToolCall,
    OutputHostedTool,
    OutputMessage,
    OutputReasoning,
    StreamEvent,
    TextAnnotated,
)
from routing.errors import UpstreamError
from routing.providers.base import as_mapping
from routing.providers.hosted import SEARCHES_PER_CALL, WEB_SEARCH, capability, hosted_item, url_citation

# The most a stream's search blocks may hold before the gateway sees them (the search's input JSON, citations
# waiting for their text block's end, the blocks' ids and queries); past it the attempt fails.
SEARCH_HELD_BYTES = 1024 * 1024
BLOCK_BYTES = 64  # what a block's entries count at least
TOOL_TYPE = "web_search_20250305"
TOOL_NAME = "web_search"
LOCATION_FIELDS = ("type", "city", "region", "country", "timezone")


def tool_problem(tool: dict[str, Any]) -> str | None:
    """Why a hosted tool cannot run on Anthropic as given (None: it can): web search only, with the options
    Anthropic's tool has (domains allowed or blocked, not both, no wildcards; an approximate user location)."""
    if capability(str(tool.get("type"))) != WEB_SEARCH:
        return f"Anthropic does not run the {tool.get('type')} tool"
    if extra := sorted(set(tool) - {"type", "filters", "user_location"}):
        return f"Anthropic's web search has no {extra[0]}"
    filters = as_mapping(tool.get("filters"))
    if extra := sorted(set(filters) - {"allowed_domains", "blocked_domains"}):
        return f"Anthropic's web search has no filters.{extra[0]}"
    if filters.get("allowed_domains") and filters.get("blocked_domains"):
        return "Anthropic's web search takes allowed or blocked domains, not both"
    domains = [*(filters.get("allowed_domains") or ()), *(filters.get("blocked_domains") or ())]
    if any(not isinstance(domain, str) or "*" in domain for domain in domains):
        return "Anthropic's web search takes domains without wildcards (a domain covers its subdomains)"
    if set(as_mapping(tool.get("user_location"))) - set(LOCATION_FIELDS):
        return "Anthropic's web search takes a user_location of type, city, region, country and timezone"
    return None


def tools_body(tools: tuple[HostedTool, ...]) -> list[dict[str, Any]]:
    """Anthropic's web search server tool for the request's web_search tool (checked by tool_problem first)."""
    body = []
    uses = max(1, SEARCHES_PER_CALL // max(1, len(tools)))  # the searches the hold covers, shared among the tools
    for tool in (hosted.spec for hosted in tools):
        filters = as_mapping(tool.get("filters"))
        entry: dict[str, Any] = {"type": TOOL_TYPE, "name": TOOL_NAME, "max_uses": uses}
        for name in ("allowed_domains", "blocked_domains"):
            if filters.get(name):
                entry[name] = list(filters[name])
        if tool.get("user_location"):
            entry["user_location"] = {"type": "approximate", **as_mapping(tool["user_location"])}
        body.append(entry)
    return body


def tool_choice(choice: object, parallel: bool | None, declared: object) -> object:
    """The tool choice with the search among the tools: the search chosen by type is Anthropic's tool by name;
    `declared` is the function tools' choice when there are some (required: any tool, the search included)."""
    if isinstance(choice, dict) and capability(str(choice.get("type"))) == WEB_SEARCH:
        found: dict[str, Any] = {"type": "tool", "name": TOOL_NAME}
        if parallel is False:
            found["disable_parallel_tool_use"] = True
        return found
    if declared is not None or choice in (None, "auto"):
        return declared
    return {"type": {"required": "any", "none": "none"}.get(str(choice), "auto")}


def searches(usage: object) -> int:
    """usage.server_tool_use.web_search_requests: the searches Anthropic ran (and bills)."""
    count = as_mapping(as_mapping(usage).get("server_tool_use")).get("web_search_requests")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0


def search_call(result: Mapping[str, Any], query: str) -> OutputHostedTool | None:
    """A web_search_tool_result block as the web_search_call item the Responses API has for a search."""
    content = result.get("content")
    found = (
        [r for r in content if isinstance(r, dict) and isinstance(r.get("url"), str)]
        if isinstance(content, list)
        else []
    )
    item = {
        "type": "web_search_call",
        "id": f"ws_{result.get('tool_use_id') or ''}",
        "status": "completed" if isinstance(content, list) else "failed",
        "action": {"type": "search", "query": query, "sources": [{"type": "url", "url": r["url"]} for r in found]},
    }
    return hosted_item(item)


def _citation(raw: object, start: int, end: int) -> dict[str, Any] | None:
    if not isinstance(raw, dict) or raw.get("type") != "web_search_result_location":
        return None
    return url_citation(raw.get("url"), raw.get("title"), start, end)


def _query(block: Mapping[str, Any]) -> str:
    query = as_mapping(block.get("input")).get("query")
    return query if isinstance(query, str) else ""


def with_searches(response: CanonicalResponse, content: object) -> CanonicalResponse:
    """A parsed answer with its searches (web_search_call items before the message) and the message's citations
    (each cited text block's span in the message's text: the text blocks joined)."""
    blocks = [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    queries = {b.get("id"): _query(b) for b in blocks if b.get("type") == "server_tool_use"}
    calls: list[OutputHostedTool] = []
    cited: list[dict[str, Any]] = []
    offset = 0
    for block in blocks:
        if block.get("type") == "web_search_tool_result":
            if (call := search_call(block, queries.get(block.get("tool_use_id"), ""))) is not None:
                calls.append(call)
        elif block.get("type") == "text":
            end = offset + len(block.get("text") or "")
            cited += [c for raw in block.get("citations") or [] if (c := _citation(raw, offset, end)) is not None]
            offset = end
    if not calls and not cited:
        return response
    output = [
        replace(i, annotations=i.annotations + tuple(cited)) if isinstance(i, OutputMessage) else i
        for i in response.output
    ]
    first = next((n for n, item in enumerate(output) if not isinstance(item, OutputReasoning)), len(output))
    return replace(response, output=(*output[:first], *calls, *output[first:]))


@dataclass
class SearchStream:
    """Anthropic's stream of a searching answer: the server tool's blocks become HostedToolCall events (never a
    function call), each cited text block's citations TextAnnotated events at its end, indexed in the message the
    gateway's fold is writing (which a block of another kind ends)."""

    queries: dict[str, str] = field(default_factory=dict)
    server_blocks: dict[int, str] = field(default_factory=dict)  # block index -> server tool use id
    partial: dict[int, list[str]] = field(default_factory=dict)  # a server tool use's input JSON so far
    text_start: dict[int, int] = field(default_factory=dict)  # a text block's start in the message
    cited: dict[int, list[object]] = field(default_factory=dict)
    offset: int = 0  # characters of the message written so far
    held: int = 0  # bytes the blocks above took in (never given back: SEARCH_HELD_BYTES bounds a stream's)

    def _hold(self, size: int) -> None:
        self.held += size
        if self.held > SEARCH_HELD_BYTES:
            raise UpstreamError(
                error_type="provider_unavailable",
                message=f"The provider's web search blocks were longer than {SEARCH_HELD_BYTES} bytes",
                retryable=True,
            )

    def take(self, kind: str, payload: dict[str, Any]) -> Iterable[StreamEvent] | None:
        """The events for an upstream event this handles (consumed), or None (the adapter's own handling)."""
        index = payload.get("index", 0)
        if kind == "content_block_start":
            return self._start(index, as_mapping(payload.get("content_block")))
        delta = as_mapping(payload.get("delta"))
        if kind == "content_block_delta":
            if index in self.server_blocks:
                part = str(delta.get("partial_json") or "")
                self._hold(len(part) + 1)  # (an empty one is an entry all the same)
                self.partial.setdefault(index, []).append(part)
                return []
            if delta.get("type") == "citations_delta":
                citation = as_mapping(delta.get("citation"))
                self._hold(len(json.dumps(citation)))
                self.cited.setdefault(index, []).append(citation)
                return []
            if delta.get("type") == "text_delta":
                self.offset += len(str(delta.get("text") or ""))
            return None
        if kind == "content_block_stop" and index in self.server_blocks:
            self._query_done(index)
            return []
        if kind == "content_block_stop" and self.cited.get(index):
            start = self.text_start.get(index, 0)
            found = [c for raw in self.cited.pop(index) if (c := _citation(raw, start, self.offset)) is not None]
            return [TextAnnotated(c) for c in found]
        return None

    def _start(self, index: int, block: Mapping[str, Any]) -> Iterable[StreamEvent] | None:
        kind = block.get("type")
        if kind == "text":
            self._hold(BLOCK_BYTES)
            self.text_start[index] = self.offset
            if block.get("citations"):
                self._hold(len(json.dumps(block["citations"])))
                self.cited[index] = list(block["citations"])
            return None
        self.offset = 0  # any other block ends the message being written: the next text starts another
        if kind == "server_tool_use":
            self.server_blocks[index] = str(block.get("id") or "")
            self.queries[self.server_blocks[index]] = _query(block)
            self._hold(BLOCK_BYTES + len(self.server_blocks[index]) + len(self.queries[self.server_blocks[index]]))
            return []
        if kind == "web_search_tool_result":
            call = search_call(block, self.queries.get(str(block.get("tool_use_id")), ""))
            return [HostedToolCall(call)] if call is not None else []
        return None

    def _query_done(self, index: int) -> None:
        text = "".join(self.partial.pop(index, []))
        try:
            query = as_mapping(json.loads(text)).get("query") if text else None
        except ValueError:
            query = None
        if isinstance(query, str):
            self.queries[self.server_blocks[index]] = query
