"""A validated Anthropic Messages request as the validated Responses request it means: from there the one
pipeline (normalize, stages, plan, hold, attempts, settle) runs unchanged."""

SHARED = (
    "model",
    "models",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "cache_control",
    "session_id",
    "provider",
    "plugins",
    "route",
    "debug",
)
SERVICE_TIERS = {"auto": "auto", "standard_only": "default"}


def _tool_choice(choice: dict) -> str | dict:
    if choice["type"] == "tool":
        return {"type": "function", "name": choice["name"]}
    return {"any": "required"}.get(choice["type"], choice["type"])


def _reasoning(thinking: dict) -> dict:
    if thinking["type"] == "disabled":
        return {"enabled": False}
    if thinking["type"] == "adaptive":
        return {"enabled": True}
    return {"enabled": True, "max_tokens": thinking["budget_tokens"]}


def responses_data(message: dict) -> dict:
    data = {name: message[name] for name in SHARED if message.get(name) is not None}
    data["input"] = (message.get("system") or []) + message["messages"]
    data["max_output_tokens"] = message["max_tokens"]
    data["service_tier"] = SERVICE_TIERS[message.get("service_tier") or "auto"]
    user = (message.get("metadata") or {}).get("user_id")
    if user:
        data["user"] = user
    if message.get("tools"):
        data["tools"] = [
            {
                "type": "function",
                "name": tool["name"],
                "description": tool.get("description"),
                "parameters": tool["input_schema"],
                "strict": tool.get("strict"),
                "cache_control": tool.get("cache_control"),
            }
            for tool in message["tools"]
        ]
    choice = message.get("tool_choice")
    if choice:
        if message.get("tools"):
            data["tool_choice"] = _tool_choice(choice)
        if choice.get("disable_parallel_tool_use") is not None:
            data["parallel_tool_calls"] = not choice["disable_parallel_tool_use"]
    if message.get("thinking"):
        data["reasoning"] = _reasoning(message["thinking"])
    if output_format := (message.get("output_config") or {}).get("format"):
        data["text"] = {"format": {"type": "json_schema", "name": "output", "schema": output_format["schema"]}}
    if message.get("stop_sequences"):
        data["stop"] = message["stop_sequences"]  # read by responses_api.normalize (not a Responses API field)
    return data
