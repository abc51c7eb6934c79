"""Nothing a caller sends to /chat/completions is lost on the way to an endpoint whose adapter speaks Chat
Completions: for generated requests, chat request -> validation -> canonical request -> the openai_chat adapter's
body is the identity on the fields that adapter carries (compared in one normal form: a lone text part and a
string are the same content, `developer` is sent as `system`, an image's default detail is explicit)."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from responses_api.chat.translate import responses_data
from responses_api.chat.validation import ChatCompletionCreateRequestSerializer
from responses_api.normalize import prepare
from routing.providers.openai_chat.request import build_body

text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
name = st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True)
call_id = st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True)
text_part = st.builds(lambda t: {"type": "text", "text": t}, text)
image_part = st.builds(
    lambda url, detail: {"type": "image_url", "image_url": {"url": url, **({"detail": detail} if detail else {})}},
    st.sampled_from(["https://example.com/a.png", "data:image/png;base64,iVBORw0KGgo="]),
    st.sampled_from([None, "auto", "low", "high"]),
)
file_part = st.builds(
    lambda data, filename: {"type": "file", "file": {"file_data": data, "filename": filename}},
    st.sampled_from(["https://example.com/a.pdf", "data:application/pdf;base64,JVBERi0="]),
    name,
)
content = st.one_of(text, st.lists(text_part, min_size=1, max_size=3))
user_content = st.one_of(text, st.lists(st.one_of(text_part, image_part, file_part), min_size=1, max_size=3))
tool_call = st.builds(
    lambda i, n, args: {"id": i, "type": "function", "function": {"name": n, "arguments": args}},
    call_id,
    name,
    st.sampled_from(["{}", '{"city": "Paris"}']),
)
message = st.one_of(
    st.builds(lambda c: {"role": "system", "content": c}, content),
    st.builds(lambda c: {"role": "developer", "content": c}, content),
    st.builds(lambda c: {"role": "user", "content": c}, user_content),
    st.builds(lambda c: {"role": "assistant", "content": c}, text.filter(bool)),
    st.builds(
        lambda calls: {"role": "assistant", "content": None, "tool_calls": calls},
        st.lists(tool_call, min_size=1, max_size=2, unique_by=lambda c: c["id"]),
    ),
    st.builds(lambda i, c: {"role": "tool", "tool_call_id": i, "content": c}, call_id, text),
)
tool = st.builds(
    lambda n, d, strict: {
        "type": "function",
        "function": {"name": n, "description": d, "parameters": {"type": "object", "properties": {}}, "strict": strict},
    },
    name,
    text,
    st.booleans(),
)
optional = {
    "temperature": st.floats(0, 2),
    "top_p": st.floats(0, 1),
    "top_k": st.integers(0, 100),
    "frequency_penalty": st.floats(-2, 2),
    "presence_penalty": st.floats(-2, 2),
    "max_completion_tokens": st.integers(1, 100_000),
    "reasoning_effort": st.sampled_from(["low", "medium", "high"]),
    "verbosity": st.sampled_from(["low", "medium", "high"]),
    "prompt_cache_key": name,
    "seed": st.integers(-(2**63), 2**63 - 1),
    "stop": st.one_of(text.filter(bool), st.lists(text.filter(bool), min_size=1, max_size=4)),
    "response_format": st.one_of(
        st.just({"type": "json_object"}),
        st.builds(
            lambda n, strict: {
                "type": "json_schema",
                "json_schema": {"name": n, "schema": {"type": "object"}, "strict": strict},
            },
            name,
            st.booleans(),
        ),
    ),
}


@st.composite
def chat_requests(draw) -> dict:
    body = {"model": "standin/echo", "messages": draw(st.lists(message, min_size=1, max_size=6))}
    for field, strategy in optional.items():
        if draw(st.booleans()):
            body[field] = draw(strategy)
    tools = draw(st.lists(tool, max_size=3, unique_by=lambda t: t["function"]["name"]))
    if tools:
        body["tools"] = tools
        body["tool_choice"] = draw(
            st.one_of(
                st.sampled_from(["auto", "none", "required"]),
                st.sampled_from([{"type": "function", "function": {"name": t["function"]["name"]}} for t in tools]),
            )
        )
        body["parallel_tool_calls"] = draw(st.booleans())
    if draw(st.booleans()):
        body["logprobs"] = True
        if draw(st.booleans()):
            body["top_logprobs"] = draw(st.integers(0, 20))
    body["stream"] = draw(st.booleans())
    return body


def _content(value, role: str):
    parts = [{"type": "text", "text": value}] if isinstance(value, str) else value
    if role == "assistant":
        return "".join(part["text"] for part in parts)
    out = []
    for part in parts:
        if part["type"] == "image_url":
            part = {"type": "image_url", "image_url": {"detail": "auto", **part["image_url"]}}
        out.append(part)
    return out


def normal_messages(messages: list[dict]) -> list[dict]:
    """One normal form: an assistant turn's tool calls joined to it, content as parts, developer as system."""
    out: list[dict] = []
    for message in messages:
        role = "system" if message["role"] == "developer" else message["role"]
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]})
            continue
        if role != "assistant":
            out.append({"role": role, "content": _content(message["content"], role)})
            continue
        text = _content(message["content"] or "", role) or None
        calls = list(message.get("tool_calls") or [])
        if calls and not text and out and out[-1]["role"] == "assistant":
            out[-1]["tool_calls"] = out[-1].get("tool_calls", []) + calls
            continue
        out.append({"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})})
    return out


def sent_upstream(body: dict) -> dict:
    serializer = ChatCompletionCreateRequestSerializer(data=body)
    assert serializer.is_valid(), serializer.errors
    canonical = prepare(data=responses_data(serializer.validated_data), account_id="acct").canonical
    return build_body(replace(canonical, model="upstream-model"))


CARRIED = ("temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty", "reasoning_effort", "verbosity")


@settings(max_examples=100, deadline=None)
@given(chat_requests())
def test_chat_to_canonical_to_chat_is_the_identity_on_carried_fields(body):
    upstream = sent_upstream(body)
    assert normal_messages(upstream["messages"]) == normal_messages(body["messages"])
    for field in CARRIED + ("prompt_cache_key",):
        assert upstream.get(field) == body.get(field), field
    assert upstream.get("max_tokens") == body.get("max_completion_tokens")
    assert upstream.get("response_format") == body.get("response_format")
    assert upstream.get("tools") == body.get("tools")
    assert upstream.get("tool_choice") == body.get("tool_choice")
    assert upstream.get("parallel_tool_calls") == body.get("parallel_tool_calls")
    assert bool(upstream.get("stream")) == body["stream"]
    assert upstream.get("seed") == body.get("seed")
    assert upstream.get("stop") == ([body["stop"]] if isinstance(body.get("stop"), str) else body.get("stop"))
    assert upstream.get("logprobs") == body.get("logprobs")
    assert upstream.get("top_logprobs") == body.get("top_logprobs")
