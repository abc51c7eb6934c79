"""A request corpus generated from the OpenAPI document: for every request body (the four front doors and every
management body), starting from a valid base body, each field the schema declares is sent (a) with a value of a
JSON type the schema rules out, (b) with an unknown sibling next to it, and (c) under a misspelt name, at every
object level the base body reaches (nested objects and array items included). Each such request is a 400 whose
error names the field's path (on /messages in Anthropic's error shape), never a 500 and never a 200 (issue 29).

A mutation the schema itself accepts (a string|array field sent an array, an open map given a new key) is no
mutation: the whole mutated body is validated against the document's schema and skipped when it passes.
Objects that declare their properties are closed: an unknown key there is a case whatever the schema says.

In-process (Django's test client), one test per endpoint and kind of mutation; each gathers all its failures.
"""

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema
import pytest
from django.test import Client
from rest_framework.test import APIClient

from byok.models import ByokKey
from gateway.accounts.models import Member
from guardrails.models import Guardrail

UNKNOWN = "zz_unknown"
# One value of each JSON type; a field gets every one its schema rules out.
WRONG_VALUES: list[Any] = ["x", 7, 1.5, {}, [], True, None]
WEATHER_PARAMETERS = {"type": "object", "properties": {}}
HEALING = {"id": "response-healing"}
PROVIDER = {"sort": "price", "max_price": {"prompt": 100}}

CALL = {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"}
RESPONSES = {
    "model": "standin/echo",
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        CALL,
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "Sunny"}]},
    ],
    "cache_control": {"type": "ephemeral"},
    "trace": {"trace_id": "t1"},
    "debug": {"echo_upstream_body": True},
    "tools": [{"type": "function", "name": "get_weather", "parameters": WEATHER_PARAMETERS}],
    "provider": PROVIDER,
    "reasoning": {"effort": "low", "summary": "auto"},
    "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}, "verbosity": "low"},
    "metadata": {"k": "v"},
    "plugins": [HEALING],
    "temperature": 0.5,
    "max_output_tokens": 100,
    "stream": True,
    "stream_options": {"include_obfuscation": False},
}
CHAT = {
    "model": "standin/echo",
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_PARAMETERS}}],
    "cache_control": {"type": "ephemeral"},
    "provider": PROVIDER,
    "reasoning": {"effort": "low"},
    "plugins": [HEALING],
    "temperature": 0.5,
    "max_tokens": 100,
    "stream": True,
    "stream_options": {"include_usage": True},
    "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}},
}
MESSAGE = {
    "model": "standin/echo",
    "max_tokens": 100,
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"}]},
    ],
    "tools": [{"name": "get_weather", "input_schema": WEATHER_PARAMETERS}],
    "cache_control": {"type": "ephemeral"},
    "thinking": {"type": "disabled"},
    "metadata": {"user_id": "u"},
    "system": [{"type": "text", "text": "Be brief"}],
    "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
    "provider": PROVIDER,
    "plugins": [HEALING],
}
COUNT_TOKENS = {"model": "standin/echo", "messages": [{"role": "user", "content": "Hi"}]}
EMBEDDING = {"model": "standin/embed", "input": "Hi", "provider": PROVIDER}
GUARDRAIL = {
    "name": "team",
    "limit_usd": 5,
    "allowed_models": ["standin/echo"],
    "content_filters": [{"pattern": "lorem", "action": "flag"}],
    "content_filter_builtins": [{"slug": "email", "action": "redact"}],
}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # as in the OpenAPI document, under /api/v1
    base: dict
    management: bool = False
    anthropic: bool = False


ENDPOINTS = {
    "responses": Endpoint("post", "/responses", RESPONSES),
    "chat": Endpoint("post", "/chat/completions", CHAT),
    "messages": Endpoint("post", "/messages", MESSAGE, anthropic=True),
    "count_tokens": Endpoint("post", "/messages/count_tokens", COUNT_TOKENS, anthropic=True),
    "embeddings": Endpoint("post", "/embeddings", EMBEDDING),
    "keys_create": Endpoint("post", "/keys", {"name": "k", "limit": 5, "include_byok_in_limit": True}, True),
    "keys_update": Endpoint("patch", "/keys/{key_hash}", {"name": "k2", "disabled": False, "limit": 5}, True),
    "byok_create": Endpoint(
        "post",
        "/byok",
        {"provider": "openai", "key": "sk-proj-abcdefghijklmnop", "allowed_models": ["openai/gpt-4o"]},
        True,
    ),
    "byok_update": Endpoint("patch", "/byok/{byok_id}", {"name": "b", "allowed_models": ["openai/gpt-4o"]}, True),
    "guardrails_create": Endpoint("post", "/guardrails", GUARDRAIL, True),
    "guardrails_update": Endpoint("patch", "/guardrails/{guardrail_id}", GUARDRAIL, True),
    "assign_keys": Endpoint(
        "post", "/guardrails/{guardrail_id}/assignments/keys", {"key_hashes": ["{key_hash}"]}, True
    ),
    "unassign_keys": Endpoint(
        "post", "/guardrails/{guardrail_id}/assignments/keys/remove", {"key_hashes": ["{key_hash}"]}, True
    ),
    "assign_members": Endpoint(
        "post", "/guardrails/{guardrail_id}/assignments/members", {"member_user_ids": ["user_a"]}, True
    ),
    "unassign_members": Endpoint(
        "post", "/guardrails/{guardrail_id}/assignments/members/remove", {"member_user_ids": ["user_a"]}, True
    ),
    "routing_settings": Endpoint(
        "patch", "/routing/settings", {"allowed_providers": ["openai"], "enforce_zdr": False}, True
    ),
    "plugin_defaults": Endpoint("put", "/plugins/defaults", {"plugins": [HEALING]}, True),
}
KINDS = ["wrong_type", "unknown_sibling", "misspelling"]
# Known defects, by endpoint and path prefix: their cases are an xfail while they fail (none today).
KNOWN: dict[str, tuple[str, ...]] = {}


# ---- the schema, as JSON Schema -----------------------------------------------------------------------------


def as_json_schema(node: Any) -> Any:
    """OpenAPI 3.0's `nullable` as JSON Schema's null type (the rest of the dialect is JSON Schema's)."""
    if isinstance(node, list):
        return [as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: as_json_schema(value) for key, value in node.items() if key not in ("nullable", "discriminator")}
    if node.get("nullable"):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


class Schema:
    def __init__(self, document: dict):
        self.components = as_json_schema(document["components"])
        self.document = document
        self.validators: dict[int, jsonschema.Draft7Validator] = {}

    def request(self, endpoint: Endpoint) -> dict:
        operation = self.document["paths"][endpoint.path][endpoint.method]
        return self.resolve(as_json_schema(operation["requestBody"]["content"]["application/json"]["schema"]))

    def valid(self, schema: dict, value: Any) -> bool:
        # One validator per schema node (they are all parts of self.components, so their ids are stable).
        if id(schema) not in self.validators:
            self.validators[id(schema)] = jsonschema.Draft7Validator({**schema, "components": self.components})
        return self.validators[id(schema)].is_valid(value)

    def resolve(self, schema: dict) -> dict:
        while "$ref" in schema:
            schema = self.components["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        return schema

    def branch(self, schema: dict, value: Any) -> dict:
        """The one schema `value` is checked against: through $ref, allOf's single member, and the oneOf/anyOf
        branch the value satisfies (a schema that declares properties is the one: its anyOf only says which of
        them are required)."""
        schema = self.resolve(schema)
        if "properties" in schema:
            return schema
        if len(schema.get("allOf", [])) == 1:
            return self.branch(schema["allOf"][0], value)
        for key in ("oneOf", "anyOf"):
            for option in schema.get(key, []):
                if self.valid(option, value):
                    return self.branch(option, value)
        return schema


# ---- the corpus ---------------------------------------------------------------------------------------------


Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Case:
    kind: str
    names: str  # the path the error must name
    body: dict
    or_names: str = ""  # a misspelt field: naming it missing names it too


def dotted(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def objects(schema: Schema, node: dict, value: Any, path: Path) -> Iterator[tuple[Path, dict, dict]]:
    """Every object of the base body whose schema declares properties: (path, its schema, the object)."""
    node = schema.branch(node, value)
    if isinstance(value, dict) and "properties" in node:
        yield path, node, value
        for name, child in value.items():
            if name in node["properties"]:
                yield from objects(schema, node["properties"][name], child, (*path, name))
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(value):
            yield from objects(schema, node["items"], item, (*path, index))


def changed(body: dict, path: Path, edit) -> dict:
    out = copy.deepcopy(body)
    target: Any = out
    for part in path:
        target = target[part]
    edit(target)
    return out


def misspelt(name: str, taken: dict) -> str:
    wrong = name + name[-1]
    return wrong if wrong not in taken else name[:-1]


def closed(node: dict) -> bool:
    return not isinstance(node.get("additionalProperties"), dict) and node.get("additionalProperties") is not True


def mutations(node: dict, kind: str) -> Iterator[tuple[str, Any, str]]:
    """For one object's schema: (the key the mutation sets, its value or RENAME, the declared field a renamed
    one leaves out: an error naming it missing names the field too)."""
    properties = node["properties"]
    if kind == "unknown_sibling" and closed(node):
        yield UNKNOWN, 1, ""
    for name in properties:
        if kind == "wrong_type":
            for wrong in WRONG_VALUES:
                yield name, wrong, ""
        elif kind == "misspelling" and closed(node):
            yield misspelt(name, properties), (RENAME, name), name


RENAME = object()


def mutated(base: dict, path: Path, key: str, value: Any) -> dict:
    def edit(target: dict) -> None:
        if isinstance(value, tuple) and value[0] is RENAME:
            target[key] = target.pop(value[1], 1)  # a field the base does not set is sent misspelt with a 1
        else:
            target[key] = value

    return changed(base, path, edit)


def corpus(schema: Schema, endpoint: Endpoint, base: dict, kind: str) -> list[Case]:
    """Every case of this kind; a wrong-typed value the whole schema still accepts is not one."""
    request = schema.request(endpoint)
    cases = []
    for path, node, _ in objects(schema, request, base, ()):
        for key, value, required in mutations(node, kind):
            body = mutated(base, path, key, value)
            if kind == "wrong_type" and schema.valid(request, body):
                continue
            cases.append(Case(kind, dotted((*path, key)), body, required and dotted((*path, required))))
    return cases


# ---- running it ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema(django_db_setup, django_db_blocker) -> Schema:
    with django_db_blocker.unblock():
        return Schema(Client().get("/api/v1/openapi.json").json())


@pytest.fixture
def records(alice, providers, standin_catalog) -> dict:
    """The ids the path and base bodies name, made through the API."""
    client = alice.client(management=True)
    Member.objects.create(account_id=alice.account_id, user_id="user_a")
    key_hash = client.post("/api/v1/keys", {"name": "target"}, format="json").json()["data"]["hash"]
    byok = client.post("/api/v1/byok", {"provider": "openai", "key": "sk-proj-abcdefghijklmnop"}, format="json")
    guardrail = client.post("/api/v1/guardrails", {"name": "target"}, format="json")
    assert ByokKey.objects.count() == 1 and Guardrail.objects.count() == 1, (byok.content, guardrail.content)
    return {"key_hash": key_hash, "byok_id": byok.json()["data"]["id"], "guardrail_id": guardrail.json()["data"]["id"]}


def filled(value: Any, records: dict) -> Any:
    return json.loads(json.dumps(value).replace('"{key_hash}"', json.dumps(records["key_hash"])))


def door_client(persona, endpoint: Endpoint) -> APIClient:
    """One client per test: each new one loads the middleware again (whitenoise scans the static files)."""
    client = APIClient()
    if endpoint.anthropic:
        client.credentials(HTTP_X_API_KEY=persona.api_key)
    else:
        key = persona.management_key if endpoint.management else persona.api_key
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@dataclass(frozen=True)
class Reply:
    status_code: int
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


def send(client: APIClient, endpoint: Endpoint, records: dict, body: dict) -> Reply:
    url = "/api/v1" + endpoint.path.format(**records)
    response = getattr(client, endpoint.method)(url, body, format="json")
    streamed = getattr(response, "streaming", False)
    return Reply(response.status_code, b"".join(response.streaming_content) if streamed else response.content)


def mentions(message: str, path: str) -> bool:
    """The whole path, or one inside it (`{}` for an object names its missing `.type`), is in the message: `n`
    is not named by `input`."""
    return re.search(rf"(?<![\w.\]]){re.escape(path)}(?![\w])", message) is not None


def within(field: str, path: str) -> bool:
    return field == path or field.startswith((f"{path}.", f"{path}["))


def verdict(response, case: Case, endpoint: Endpoint) -> str | None:
    """None when the response is a 400 naming the case's path in the door's error shape, else what is wrong."""
    paths = [path for path in (case.names, case.or_names) if path]
    if response.status_code != 400:
        return f"{response.status_code} {response.content[:300]!r}"
    body = response.json()
    if endpoint.anthropic:
        if body.get("type") != "error" or body["error"].get("type") != "invalid_request_error":
            return f"not Anthropic's error shape: {body}"
        named = any(mentions(body["error"]["message"], path) for path in paths)
    else:
        error = body.get("error", {})
        if error.get("code") != 400:
            return f"not the error envelope: {body}"
        fields = (error.get("metadata") or {}).get("fields", {})
        named = any(
            any(within(field, path) for field in fields) if fields else mentions(error["message"], path)
            for path in paths
        )
    return None if named else f"400 not naming it: {str(body)[:300]}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ENDPOINTS)
def test_every_mutated_field_is_a_400_naming_it(alice, records, schema, name, kind):
    endpoint = ENDPOINTS[name]
    base = filled(endpoint.base, records)
    assert schema.valid(schema.request(endpoint), base), "the base body does not satisfy the schema"
    client = door_client(alice, endpoint)
    accepted = send(client, endpoint, records, base)
    assert accepted.status_code < 300, accepted.content
    cases = corpus(schema, endpoint, base, kind)
    assert cases, "no case generated"
    failures = [
        (case, problem)
        for case in cases
        if (problem := verdict(send(client, endpoint, records, case.body), case, endpoint))
    ]
    known = [(case, problem) for case, problem in failures if case.names.startswith(KNOWN.get(name, ()))]
    new = [
        f"{case.names} {json.dumps(case.body)[:200]} -> {problem}"
        for case, problem in failures
        if (case, problem) not in known
    ]
    assert not new, f"{len(new)} of {len(cases)} cases:\n" + "\n".join(new)
    if known:
        pytest.xfail(f"{len(known)} known: " + ", ".join(sorted({case.names for case, _ in known})))
