"""A validated Chat Completions request as the validated Responses request it means: from there the one
pipeline (normalize, stages, plan, hold, attempts, settle) runs unchanged."""

# The gateway's own fields, the same on both APIs.
SHARED = (
    "model",
    "models",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "frequency_penalty",
    "presence_penalty",
    "parallel_tool_calls",
    "metadata",
    "service_tier",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "cache_control",
    "session_id",
    "provider",
    "plugins",
    "route",
    "debug",
)


def text_format(response_format: dict | None) -> dict | None:
    """`response_format` as the Responses `text.format`."""
    if not response_format:
        return None
    if response_format["type"] != "json_schema":
        return {"type": response_format["type"]}
    schema = response_format["json_schema"]
    return {"type": "json_schema", **{k: v for k, v in schema.items() if v is not None}}


def web_search_tool(options: dict) -> dict:
    """`web_search_options` as the Responses `web_search` tool (context size, approximate user location)."""
    tool: dict = {"type": "web_search"}
    if options.get("search_context_size"):
        tool["search_context_size"] = options["search_context_size"]
    if location := (options.get("user_location") or {}).get("approximate"):
        tool["user_location"] = {"type": "approximate", **location}
    return tool


def responses_data(chat: dict) -> dict:
    data = {name: chat[name] for name in SHARED if chat.get(name) is not None}
    data["input"] = chat["messages"]
    data["max_output_tokens"] = chat.get("max_completion_tokens") or chat.get("max_tokens")
    if chat.get("tools"):
        data["tools"] = [{"type": "function", **tool["function"]} for tool in chat["tools"]]
    if chat.get("web_search_options") is not None:  # the provider's own search: a hosted tool (routing.providers)
        data["tools"] = [*data.get("tools", []), web_search_tool(chat["web_search_options"])]
    if data.get("tools") and chat.get("tool_choice") is not None:  # `required` with search alone: search
        data["tool_choice"] = chat["tool_choice"]
    reasoning = dict(chat.get("reasoning") or {})
    if chat.get("reasoning_effort"):
        reasoning["effort"] = chat["reasoning_effort"]
    if reasoning:
        data["reasoning"] = reasoning
    text = {"format": text_format(chat.get("response_format")), "verbosity": chat.get("verbosity")}
    text = {key: value for key, value in text.items() if value is not None}
    if text:
        data["text"] = text
    data.update(sampling(chat))
    return data


def sampling(chat: dict) -> dict:
    """Stop sequences, seed and logprobs, under the names responses_api.normalize reads (the Responses API has
    `top_logprobs` only; `stop` and `seed` reach the canonical request from these two front doors)."""
    out: dict = {"stop": chat.get("stop"), "seed": chat.get("seed")}
    if chat.get("logprobs"):
        out.update(logprobs=True, top_logprobs=chat.get("top_logprobs"))
    return {key: value for key, value in out.items() if value is not None}
