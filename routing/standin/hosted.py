"""The stand-in's provider-run tools, so that passing them through is testable offline: a request carrying them
gets an answer shaped like the real provider's.

- OpenAI Responses (`tools` of type web_search*, code_interpreter, image_generation, mcp, file_search): one output
  item per tool before the message (`web_search_call` with `action: {type: search, query, sources?}` (sources when
  `include` asks for web_search_call.action.sources), `code_interpreter_call`, `image_generation_call`, `mcp_call`,
  `file_search_call`); the message cites the search's pages with `url_citation` annotations. Streamed: each item's
  output_item.added, its progress events (`response.web_search_call.in_progress`, `.searching`, `.completed`, ...)
  and output_item.done, then the message's deltas and `response.output_text.annotation.added` events.
- Anthropic Messages (`web_search_20250305` tool): `server_tool_use` and `web_search_tool_result` blocks, then text
  blocks whose cited ones carry `web_search_result_location` citations; `usage.server_tool_use.web_search_requests`.
  Streamed: the server tool's input as input_json_delta, the result block whole, `citations_delta` before a cited
  block's text.
- OpenAI Chat Completions (`web_search_options`): the message's `annotations` (`{type: url_citation, url_citation:
  {url, title, start_index, end_index}}`), streamed in the last content chunk's delta.

The search's pages are the stand-in engine's (routing.standin.search.RESULTS), filtered by the tool's allowed and
blocked domains, at most 3; the answer is the scripted text, then "Sources: <title>; <title>." with each title
cited. https://platform.openai.com/docs/guides/tools-web-search
https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool"""

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from routing.standin import formats, formats_anthropic
from routing.standin.formats import Plan, split, sse
from routing.standin.search import RESULTS

RESPONSES_TOOLS = ("web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11")
ANTHROPIC_TOOL = "web_search_20250305"
SOURCES = "web_search_call.action.sources"
FLOOD_ITEM_BYTES = 64 * 1024  # the logs of one flooding code_interpreter_call (script.flood_field "hosted")
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
Wire = Callable[[Plan], dict[str, Any]]
Stream = Callable[[Plan], tuple[list[bytes], bytes]]


@dataclass(frozen=True)
class Search:
    query: str
    pages: tuple[tuple[str, str], ...]  # (url, title)


def _matches(url: str, domain: str) -> bool:
    parts = urlsplit(url)
    host, _, path = domain.lower().partition("/")
    hostname = (parts.hostname or "").lower()
    on_host = hostname == host or hostname.endswith("." + host)
    return on_host and (not path or parts.path.rstrip("/").startswith("/" + path.rstrip("/")))


def search(query: str, allowed: list[str], blocked: list[str]) -> Search:
    pages = [
        (url, title)
        for url, title, _ in RESULTS
        if (not allowed or any(_matches(url, d) for d in allowed)) and not any(_matches(url, d) for d in blocked)
    ]
    return Search(query=" ".join(query.split())[:100], pages=tuple(pages[:3]))


def _last_user_text(body: dict[str, Any]) -> str:
    turns = body.get("input") if isinstance(body.get("input"), list) else body.get("messages")
    turns = turns if isinstance(turns, list) else []
    for turn in reversed(turns):
        if isinstance(turn, dict) and turn.get("role") == "user":
            content = turn.get("content")
            if isinstance(content, str):
                return content
            return " ".join(str(p.get("text") or "") for p in content or [] if isinstance(p, dict))
    return str(body.get("input") or "")


def answer(plan: Plan, found: Search) -> tuple[str, list[tuple[int, int, str, str]]]:
    """The answer's text and its citations (start, end, url, title): the scripted text, then the sources."""
    if not found.pages:
        return plan.text, []
    text, cited = plan.text + " Sources: ", []
    for number, (url, title) in enumerate(found.pages):
        text += "; " if number else ""
        cited.append((len(text), len(text) + len(title), url, title))
        text += title
    return text + ".", cited


# ---- OpenAI Responses --------------------------------------------------------------------------


def _flood_items(flood: str) -> list[dict[str, Any]]:
    """A hostile upstream's provider-run items: code interpreter calls whose logs carry `flood`."""
    pieces = [flood[start : start + FLOOD_ITEM_BYTES] for start in range(0, len(flood), FLOOD_ITEM_BYTES)]
    return [
        {
            "type": "code_interpreter_call",
            "id": f"ci_flood_{n}",
            "status": "completed",
            "code": "print(open('/dev/urandom').read())",
            "container_id": "cntr_standin",
            "outputs": [{"type": "logs", "logs": piece}],
        }
        for n, piece in enumerate(pieces)
    ]


def _responses_items(body: dict[str, Any], found: Search | None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for n, tool in enumerate(t for t in body.get("tools") or [] if isinstance(t, dict)):
        kind, suffix = tool.get("type"), f"standin_{n + 1}"
        if kind in RESPONSES_TOOLS and found is not None:
            action: dict[str, Any] = {"type": "search", "query": found.query}
            if SOURCES in (body.get("include") or []):
                action["sources"] = [{"type": "url", "url": url} for url, _ in found.pages]
            items.append({"type": "web_search_call", "id": f"ws_{suffix}", "status": "completed", "action": action})
        elif kind == "code_interpreter":
            container = tool.get("container") if isinstance(tool.get("container"), str) else "cntr_standin"
            items.append(
                {
                    "type": "code_interpreter_call",
                    "id": f"ci_{suffix}",
                    "status": "completed",
                    "code": "print(6 * 7)",
                    "container_id": container,
                    "outputs": [{"type": "logs", "logs": "42\n"}],
                }
            )
        elif kind == "image_generation":
            items.append(
                {"type": "image_generation_call", "id": f"ig_{suffix}", "status": "completed", "result": PIXEL}
            )
        elif kind == "mcp":
            items.append(
                {
                    "type": "mcp_call",
                    "id": f"mcp_{suffix}",
                    "status": "completed",
                    "name": "echo",
                    "arguments": "{}",
                    "server_label": str(tool.get("server_label") or ""),
                    "output": "stand-in MCP output",
                }
            )
        elif kind == "file_search":
            items.append(
                {
                    "type": "file_search_call",
                    "id": f"fs_{suffix}",
                    "status": "completed",
                    "queries": ["stand-in"],
                    "results": None,
                }
            )
    return items


def _responses_search(body: dict[str, Any]) -> Search | None:
    tool = next((t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") in RESPONSES_TOOLS), None)
    if tool is None:
        return None
    allowed = (tool.get("filters") or {}).get("allowed_domains") or []
    return search(_last_user_text(body), allowed, [])


def _url_citations(cited: list[tuple[int, int, str, str]]) -> list[dict[str, Any]]:
    return [
        {"type": "url_citation", "start_index": start, "end_index": end, "url": url, "title": title}
        for start, end, url, title in cited
    ]


def responses_body(body: dict[str, Any], plan: Plan) -> dict[str, Any]:
    found = _responses_search(body)
    text, cited = answer(plan, found) if found else (plan.text, [])
    answered = formats.responses_body(replace(plan, text=text))
    for item in answered["output"]:
        if item["type"] == "message":
            item["content"][0]["annotations"] = _url_citations(cited)
    answered["output"] = _responses_items(body, found) + _flood_items(plan.hosted_flood) + answered["output"]
    return answered


def responses_stream(body: dict[str, Any], plan: Plan) -> tuple[list[bytes], bytes]:
    final = responses_body(body, plan)
    seq = iter(range(10_000))

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, event=kind)

    out = [event("response.created", response={**final, "status": "in_progress", "output": [], "usage": None})]
    for index, item in enumerate(final["output"]):
        kind = item["type"]
        if kind == "message":
            message_id, text = item["id"], item["content"][0]["text"]
            out.append(event("response.output_item.added", output_index=index, item={**item, "content": []}))
            out += [
                event(
                    "response.output_text.delta",
                    item_id=message_id,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
                for piece in split(text, plan.chunks)
            ]
            out += [
                event(
                    "response.output_text.annotation.added",
                    item_id=message_id,
                    output_index=index,
                    content_index=0,
                    annotation_index=n,
                    annotation=annotation,
                )
                for n, annotation in enumerate(item["content"][0]["annotations"])
            ]
            out.append(event("response.output_item.done", output_index=index, item=item))
            continue
        out.append(event("response.output_item.added", output_index=index, item={**item, "status": "in_progress"}))
        steps = {"web_search_call": ("in_progress", "searching", "completed")}.get(kind, ("in_progress", "completed"))
        out += [event(f"response.{kind}.{step}", item_id=item["id"], output_index=index) for step in steps]
        out.append(event("response.output_item.done", output_index=index, item=item))
    return out, event("response.completed", response=final)


# ---- Anthropic Messages ------------------------------------------------------------------------


def _anthropic_search(body: dict[str, Any]) -> Search | None:
    tool = next((t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == ANTHROPIC_TOOL), None)
    if tool is None:
        return None
    return search(_last_user_text(body), tool.get("allowed_domains") or [], tool.get("blocked_domains") or [])


def _anthropic_content(plan: Plan, found: Search) -> list[dict[str, Any]]:
    text, cited = answer(plan, found)
    server_id = "srvtoolu_standin_1"
    results = [
        {
            "type": "web_search_result",
            "url": url,
            "title": title,
            "encrypted_content": "standin-encrypted",
            "page_age": None,
        }
        for url, title in found.pages
    ]
    content: list[dict[str, Any]] = [
        {"type": "server_tool_use", "id": server_id, "name": "web_search", "input": {"query": found.query}},
        {"type": "web_search_tool_result", "tool_use_id": server_id, "content": results},
    ]
    position = 0
    for start, end, url, title in cited:  # plain text between the citations, each cited title its own block
        if start > position:
            content.append({"type": "text", "text": text[position:start]})
        citation = {
            "type": "web_search_result_location",
            "url": url,
            "title": title,
            "encrypted_index": "standin-index",
            "cited_text": title,
        }
        content.append({"type": "text", "text": text[start:end], "citations": [citation]})
        position = end
    if position < len(text):
        content.append({"type": "text", "text": text[position:]})
    return content


def messages_body(body: dict[str, Any], plan: Plan) -> dict[str, Any]:
    answered = formats_anthropic.messages_body(plan)
    found = _anthropic_search(body)
    if found is not None:
        answered["content"] = [b for b in answered["content"] if b["type"] == "thinking"] + _anthropic_content(
            plan, found
        )
        answered["usage"]["server_tool_use"] = {"web_search_requests": 1, "web_fetch_requests": 0}
    return answered


def messages_stream(body: dict[str, Any], plan: Plan) -> tuple[list[bytes], bytes]:
    final = messages_body(body, plan)

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, **fields}, event=kind)

    start = {**final, "content": [], "stop_reason": None, "usage": {**final["usage"], "output_tokens": 1}}
    out = [event("message_start", message=start)]
    for index, block in enumerate(final["content"]):
        kind = block["type"]
        if kind == "server_tool_use":
            out.append(event("content_block_start", index=index, content_block={**block, "input": {}}))
            out += [
                event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
                for piece in split(json.dumps(block["input"]), 2)
            ]
        elif kind == "text":
            opened = {"type": "text", "text": "", **({"citations": []} if "citations" in block else {})}
            out.append(event("content_block_start", index=index, content_block=opened))
            out += [
                event("content_block_delta", index=index, delta={"type": "citations_delta", "citation": citation})
                for citation in block.get("citations") or []
            ]
            out += [
                event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
                for piece in split(block["text"], 2)
            ]
        elif kind == "thinking":
            out.append(event("content_block_start", index=index, content_block={**block, "thinking": ""}))
            out.append(
                event(
                    "content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": block["thinking"]}
                )
            )
        else:  # the search's result block arrives whole
            out.append(event("content_block_start", index=index, content_block=block))
        out.append(event("content_block_stop", index=index))
    terminal = event(
        "message_delta",
        delta={"stop_reason": final["stop_reason"], "stop_sequence": None},
        usage={"output_tokens": plan.output_tokens, "server_tool_use": final["usage"].get("server_tool_use")},
    ) + event("message_stop")
    return out, terminal


# ---- OpenAI Chat Completions -------------------------------------------------------------------


def chat_body(body: dict[str, Any], plan: Plan) -> dict[str, Any]:
    found = search(_last_user_text(body), [], [])
    text, cited = answer(plan, found)
    answered = formats.chat_body(replace(plan, text=text))
    answered["choices"][0]["message"]["annotations"] = [
        {"type": "url_citation", "url_citation": {"start_index": s, "end_index": e, "url": url, "title": title}}
        for s, e, url, title in cited
    ]
    return answered


def chat_stream(body: dict[str, Any], plan: Plan) -> tuple[list[bytes], bytes]:
    final = chat_body(body, plan)
    message = final["choices"][0]["message"]
    chunks, terminal = formats.chat_stream(replace(plan, text=message["content"]))
    base = {"id": final["id"], "object": "chat.completion.chunk", "created": final["created"], "model": plan.model}
    delta = {"content": "", "annotations": message["annotations"]}
    return chunks + [sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})], terminal


# ---- which requests ----------------------------------------------------------------------------


def wire(path: str, body: dict[str, Any], body_fn: Wire, stream_fn: Stream) -> tuple[Wire, Stream]:
    """The answer builders for this request: the emulation's when it carries a provider-run tool (and the script
    does not call a function tool), else the given ones."""
    if path.endswith("/responses") and any(
        isinstance(t, dict)
        and t.get("type") in (*RESPONSES_TOOLS, "code_interpreter", "image_generation", "mcp", "file_search")
        for t in body.get("tools") or []
    ):
        emulated = (responses_body, responses_stream)
    elif path.endswith("/messages") and _anthropic_search(body) is not None:
        emulated = (messages_body, messages_stream)
    elif path.endswith("/chat/completions") and isinstance(body.get("web_search_options"), dict):
        emulated = (chat_body, chat_stream)
    else:
        return body_fn, stream_fn
    build, streamed = emulated

    def body_of(plan: Plan) -> dict[str, Any]:
        return body_fn(plan) if plan.tool_name else build(body, plan)

    def stream_of(plan: Plan) -> tuple[list[bytes], bytes]:
        return stream_fn(plan) if plan.tool_name else streamed(body, plan)

    return body_of, stream_of
