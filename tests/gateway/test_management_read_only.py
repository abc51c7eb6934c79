"""Every management body refuses, with a 400 naming the field, a name it does not take (issue 29 item 3): an
unknown or misspelt one (`allowed_modells` made a BYOK key without a model filter), and a field the record shows
but no request sets (`provider`, `workspace_id`, `id`, `created_at`, `hash`, ...), which the message calls
read-only, so a PATCH of it is never a 200 that changes nothing. The 100-entry BYOK and guardrail filter limits
count the entries sent, duplicates included (issue 29 item 4)."""

import pytest

from byok.models import ByokKey
from gateway.accounts.models import ApiKey
from guardrails.models import Guardrail
from tests.support import assert_error_envelope

OPENAI_KEY = {"provider": "openai", "key": "sk-proj-abcdefghijklmnop"}
NIL_UUID = "00000000-0000-0000-0000-000000000000"
WHEN = "2030-01-01T00:00:00Z"


def refusal(response, field: str) -> str:
    """The reason given for `field` (the body is a 400 naming it, in the message and in metadata.fields)."""
    error = assert_error_envelope(response, 400)["error"]
    assert field in error["message"], error
    return error["metadata"]["fields"][field]


def made(client, kind: str) -> str:
    """The path of a new record of `kind`."""
    if kind == "keys":
        return "/api/v1/keys/" + client.post("/api/v1/keys", {"name": "ci"}, format="json").json()["data"]["hash"]
    if kind == "byok":
        return "/api/v1/byok/" + client.post("/api/v1/byok", OPENAI_KEY, format="json").json()["data"]["id"]
    return "/api/v1/guardrails/" + client.post("/api/v1/guardrails", {"name": "t"}, format="json").json()["data"]["id"]


CREATE = {"keys": {"name": "ci"}, "byok": OPENAI_KEY, "guardrails": {"name": "team"}}

# (kind, field, value) sent on PATCH of a record of that kind: each is shown on the record and never changes.
READ_ONLY_ON_PATCH = [
    ("byok", "provider", "azure"),
    ("byok", "workspace_id", NIL_UUID),
    ("byok", "id", NIL_UUID),
    ("byok", "created_at", WHEN),
    ("byok", "label", "x"),
    ("keys", "hash", "a" * 64),
    ("keys", "created_at", WHEN),
    ("keys", "workspace_id", NIL_UUID),
    ("keys", "usage", 0),
    ("keys", "is_management_key", True),
    ("guardrails", "id", NIL_UUID),
    ("guardrails", "workspace_id", NIL_UUID),
    ("guardrails", "created_at", WHEN),
    ("guardrails", "usage", 0),
]
READ_ONLY_ON_CREATE = [
    ("byok", "id", NIL_UUID),
    ("byok", "created_at", WHEN),
    ("byok", "sort_order", 0),
    ("keys", "hash", "a" * 64),
    ("keys", "usage", 0),
    ("guardrails", "created_at", WHEN),
]


@pytest.mark.parametrize("kind,field,value", READ_ONLY_ON_PATCH)
def test_patching_a_read_only_field_is_400_saying_it_cannot_be_changed(alice, providers, kind, field, value):
    client = alice.client(management=True)
    path = made(client, kind)
    before = client.get(path).json() if kind != "keys" else None
    reason = refusal(client.patch(path, {"name": "renamed", field: value}, format="json"), field)
    assert "read-only" in reason and "cannot be changed" in reason
    if before is not None:
        assert client.get(path).json() == before  # nothing else in the body was applied either


@pytest.mark.parametrize("kind,field,value", READ_ONLY_ON_CREATE)
def test_creating_with_a_read_only_field_is_400_and_makes_nothing(alice, providers, kind, field, value):
    model = {"keys": ApiKey, "byok": ByokKey, "guardrails": Guardrail}[kind]
    count = model.objects.count()
    response = alice.client(management=True).post(f"/api/v1/{kind}", {**CREATE[kind], field: value}, format="json")
    assert "read-only" in refusal(response, field)
    assert model.objects.count() == count


# (method, path, body, the field refused): a misspelling or an unknown name on every management body.
UNKNOWN = [
    ("post", "/api/v1/byok", {**OPENAI_KEY, "allowed_modells": ["openai/gpt-4o"]}, "allowed_modells"),
    ("patch", "byok", {"allowed_modells": ["openai/gpt-4o"]}, "allowed_modells"),
    ("post", "/api/v1/keys", {"name": "ci", "limt": 5}, "limt"),
    ("patch", "keys", {"disabeld": True}, "disabeld"),
    ("post", "/api/v1/guardrails", {"name": "t", "allowed_modells": ["openai/gpt-4o"]}, "allowed_modells"),
    ("patch", "guardrails", {"ignored_provders": ["openai"]}, "ignored_provders"),
    ("patch", "/api/v1/routing/settings", {"allowed_provders": ["openai"]}, "allowed_provders"),
    ("put", "/api/v1/plugins/defaults", {"plugins": [], "plugin": []}, "plugin"),
    ("post", "guardrails/assignments/keys", {"key_hashes": ["a" * 64], "all": True}, "all"),
    ("post", "guardrails/assignments/members/remove", {"member_user_ids": ["u"], "everyone": True}, "everyone"),
]


@pytest.mark.parametrize("method,where,body,field", UNKNOWN, ids=[f"{m}-{w}-{f}" for m, w, _, f in UNKNOWN])
def test_unknown_and_misspelt_fields_are_400_naming_them(alice, providers, method, where, body, field):
    client = alice.client(management=True)
    if where in ("byok", "keys", "guardrails"):
        path = made(client, where)
    elif where.startswith("guardrails/"):
        path = made(client, "guardrails") + where.removeprefix("guardrails")
    else:
        path = where
    reason = refusal(getattr(client, method)(path, body, format="json"), field)
    assert "unknown field" in reason


@pytest.mark.parametrize("field", ["allowed_models", "allowed_api_key_hashes", "allowed_user_ids"])
def test_byok_filter_limit_counts_duplicates(alice, providers, field):
    value = {
        "allowed_models": "openai/gpt-4o",
        "allowed_api_key_hashes": alice.provisioned.inference_key.key.hash,
        "allowed_user_ids": "u1",
    }[field]
    client = alice.client(management=True)
    response = client.post("/api/v1/byok", {**OPENAI_KEY, field: [value] * 150}, format="json")
    assert "100" in refusal(response, field)
    assert not ByokKey.objects.exists()
    path = made(client, "byok")
    assert "100" in refusal(client.patch(path, {field: [value] * 101}, format="json"), field)


@pytest.mark.parametrize("field", ["allowed_models", "ignored_models", "allowed_providers", "ignored_providers"])
def test_guardrail_filter_limit_counts_duplicates(alice, providers, field):
    value = "openai/gpt-4o" if field.endswith("models") else "openai"
    client = alice.client(management=True)
    assert "100" in refusal(
        client.post("/api/v1/guardrails", {"name": "t", field: [value] * 150}, format="json"), field
    )
    assert not Guardrail.objects.exists()


def test_a_hundred_entries_with_repeats_still_pass_and_are_kept_once(alice, providers):
    client = alice.client(management=True)
    response = client.post("/api/v1/byok", {**OPENAI_KEY, "allowed_models": ["openai/gpt-4o"] * 100}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["data"]["allowed_models"] == ["openai/gpt-4o"]
