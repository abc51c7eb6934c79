"""Issue 9 item 4 (API side): BYOK key material must be printable, header-safe text. Every bad form of every
credential shape is a 400 naming the field (never echoing the value) on POST /byok and on PATCH /byok key
rotation, and nothing is stored; `seal()` never fails on a string; the operator's credential and the catalog
loader apply the same rules."""

import json
import re

import pytest

from byok.crypto import Sealed, mask_secret, seal, unseal
from byok.models import ByokKey
from byok.selectors import byok_credentials
from byok.shapes import MAX_SECRET_CHARS, ParsedCredential, ShapeError, parse_credential
from routing.models import Provider
from routing.services import CatalogError, catalog_load, provider_credential_set
from tests.support import DEPLOYMENT, SERVICE_ACCOUNT, assert_error_envelope

CATALOG_CONFIG = {"api_key": "azure-catalog-key-123", "resource_name": "acme-ai"}
ACCESS_KEYS = {"accessKeyId": "AKIAABCDEFGHIJKLMNOP", "secretAccessKey": "s" * 40, "region": "us-east-1"}


def post_raw(client, url: str, body: dict, method: str = "post"):
    """JSON with \\u escapes (ensure_ascii), so a lone surrogate reaches the server as JSON allows it."""
    return getattr(client, method)(url, data=json.dumps(body, ensure_ascii=True), content_type="application/json")


# (provider, key, the field the message must name, what it must say)
BAD = [
    # plain keys (OpenAI-style): sent as `Authorization: Bearer <key>`
    ("openai", "sk-abc\x01defghijklmnop", "key", "control character"),
    ("openai", "sk-abc\x00defghijklmnop", "key", "NUL"),
    ("openai", "sk-abc\x7fdefghijklmnop", "key", "control character"),
    ("openai", "sk-abc\x85defghijklmnop", "key", "control character"),
    ("openai", "sk-abc\u2028defghijklmnop", "key", "control character"),
    ("openai", "sk-abcédefghijklmnop", "key", "printable ASCII"),
    ("openai", "sk-abc\u00a0defghijklmnop", "key", "whitespace"),
    ("openai", "sk-abc\r\nX-Injected: 1", "key", "whitespace"),
    ("openai", " sk-leading-space-key", "key", "whitespace"),
    ("openai", "sk-trailing-newline-key\n", "key", "whitespace"),
    ("openai", "sk-" + "a" * MAX_SECRET_CHARS, "key", "longer than"),
    # Azure catalog and per-deployment configs: `api-key` header, URLs
    ("azure", [{**CATALOG_CONFIG, "api_key": "azure\x00key-123456"}], "key[0].api_key", "NUL"),
    ("azure", [CATALOG_CONFIG, {**DEPLOYMENT, "api_key": "azure-key\r\nX: y"}], "key[1].api_key", "whitespace"),
    ("azure", json.dumps([{**CATALOG_CONFIG, "api_key": "azure-key-\ud83d"}]), "key[0].api_key", "lone surrogate"),
    ("azure", [{**CATALOG_CONFIG, "resource_name": "acme\n"}], "key[0].resource_name", "subdomain"),
    (
        "azure",
        [{**DEPLOYMENT, "endpoint_url": DEPLOYMENT["endpoint_url"].replace("acme.", "ac\nme.")}],
        "key[0].endpoint_url",
        "whitespace",
    ),
    (
        "azure",
        [{**DEPLOYMENT, "endpoint_url": DEPLOYMENT["endpoint_url"].replace("acme.", "ac\tme.")}],
        "key[0].endpoint_url",
        "whitespace",
    ),
    (
        "azure",
        [{**DEPLOYMENT, "endpoint_url": DEPLOYMENT["endpoint_url"].replace("acme.", "ac\x00me.")}],
        "key[0].endpoint_url",
        "NUL",
    ),
    (
        "azure",
        [{**DEPLOYMENT, "endpoint_url": DEPLOYMENT["endpoint_url"].replace("acme.", "acmé.")}],
        "key[0].endpoint_url",
        "printable ASCII",
    ),
    (
        "azure",
        [{**DEPLOYMENT, "endpoint_url": "https://[::1/openai/deployments/x/chat/completions?api-version=1"}],
        "key[0].endpoint_url",
        "not a valid URL",
    ),
    (
        "azure",
        [{**DEPLOYMENT, "endpoint_url": "https://acme.openai.azure.com:99999/d/x/chat/completions?api-version=1"}],
        "key[0].endpoint_url",
        "not a valid URL",
    ),
    ("azure", [{**DEPLOYMENT, "model_id": "gpt4o\x1b[31m"}], "key[0].model_id", "control character"),
    ("azure", [{**DEPLOYMENT, "model_slug": "openai/gpt-4o\n"}], "key[0].model_slug", "model_slug"),
    ("azure", [CATALOG_CONFIG] * 101, "key", "at most 100"),
    ("azure", "[" * 20000 + "]" * 20000, "key", "longer than"),
    ("azure", "[" * 5000 + "]" * 5000, "key", "array of Azure configs"),  # nesting the JSON parser refuses
    # Bedrock: API key (bearer) or access keys (SigV4)
    ("amazon-bedrock", "bedrock-api-key\x00abcdefghij", "key", "NUL"),
    (
        "amazon-bedrock",
        {**ACCESS_KEYS, "secretAccessKey": "s" * 20 + "\x07" + "s" * 19},
        "key.secretAccessKey",
        "control character",
    ),
    (
        "amazon-bedrock",
        {**ACCESS_KEYS, "secretAccessKey": "s" * 20 + "ü" + "s" * 19},
        "key.secretAccessKey",
        "printable ASCII",
    ),
    (
        "amazon-bedrock",
        {**ACCESS_KEYS, "secretAccessKey": "s" * (MAX_SECRET_CHARS + 1)},
        "key.secretAccessKey",
        "longer than",
    ),
    ("amazon-bedrock", {**ACCESS_KEYS, "accessKeyId": "AKIAABCDEFGHIJKLMNOP\n"}, "key.accessKeyId", "accessKeyId"),
    ("amazon-bedrock", {**ACCESS_KEYS, "region": "us-east-1\n"}, "key.region", "region"),
    # Vertex service account: private_key may span lines, everything else ends up in a URL, JWT or header
    (
        "google-vertex",
        {**SERVICE_ACCOUNT, "private_key": SERVICE_ACCOUNT["private_key"] + "\x00"},
        "key.private_key",
        "NUL",
    ),
    (
        "google-vertex",
        json.dumps({**SERVICE_ACCOUNT, "private_key": SERVICE_ACCOUNT["private_key"] + "\ud800"}),
        "key.private_key",
        "lone surrogate",
    ),
    (
        "amazon-bedrock",
        json.dumps({**ACCESS_KEYS, "secretAccessKey": "s" * 40 + "\udc00"}),
        "key.secretAccessKey",
        "lone surrogate",
    ),
    (
        "google-vertex",
        {**SERVICE_ACCOUNT, "private_key": SERVICE_ACCOUNT["private_key"] + "\x0b"},
        "key.private_key",
        "control character",
    ),
    (
        "google-vertex",
        {**SERVICE_ACCOUNT, "private_key": SERVICE_ACCOUNT["private_key"] * 300},
        "key.private_key",
        "longer than",
    ),
    ("google-vertex", {**SERVICE_ACCOUNT, "private_key_id": "abc\r\ndef"}, "key.private_key_id", "whitespace"),
    (
        "google-vertex",
        {**SERVICE_ACCOUNT, "client_email": "gw@pröj.iam.gserviceaccount.com"},
        "key.client_email",
        "printable ASCII",
    ),
    ("google-vertex", {**SERVICE_ACCOUNT, "project_id": "../../other"}, "key.project_id", "project id"),
    ("google-vertex", {**SERVICE_ACCOUNT, "token_uri": "ftp://oauth2.googleapis.com/token"}, "key.token_uri", "http"),
    (
        "google-vertex",
        {**SERVICE_ACCOUNT, "token_uri": "https://oauth2.googleapis.com/to ken"},
        "key.token_uri",
        "whitespace",
    ),
    ("google-vertex", {**SERVICE_ACCOUNT, "universe_domain": "googleapis.com\x00"}, "key.universe_domain", "NUL"),
    ("google-vertex", {**SERVICE_ACCOUNT, "client_id": "1" * 300}, "key.client_id", "longer than"),
    ("google-vertex", {**SERVICE_ACCOUNT, "region": "us-central1\n"}, "key.region", "region"),
]


@pytest.mark.parametrize("provider,key,field,why", BAD)
def test_bad_key_material_is_400_naming_the_field_and_nothing_is_stored(alice, providers, provider, key, field, why):
    client = alice.client(management=True)
    response = post_raw(client, "/api/v1/byok", {"provider": provider, "key": key})
    body = assert_error_envelope(response, 400)
    message = body["error"]["message"]
    assert message.startswith("key: ") and f"{field} " in message and why in message, message
    assert body["error"]["metadata"]["fields"] == {"key": message.removeprefix("key: ")}
    assert ByokKey.objects.count() == 0
    secret_bits = ["defghijklmnop", "abcdefghij", "s" * 19, "MIIEv", "catalog-key-1"]
    assert not any(bit in response.content.decode() for bit in secret_bits)


@pytest.mark.parametrize(
    "provider,key",
    [
        ("openai", "sk-abc\ud800defghijklmnop"),
        ("amazon-bedrock", "bedrock-api-key-\udfffbcdefghij"),
        ("azure", [{**CATALOG_CONFIG, "api_key": "azure-key-\ud83d"}]),
    ],
)
def test_lone_surrogate_anywhere_in_the_body_is_400_and_nothing_is_stored(alice, providers, provider, key):
    """Refused by the JSON parser or by the credential check (which names the field), never a 500 from seal()."""
    response = post_raw(alice.client(management=True), "/api/v1/byok", {"provider": provider, "key": key})
    body = assert_error_envelope(response, 400)
    assert "surrogate" in body["error"]["message"]
    assert ByokKey.objects.count() == 0


@pytest.mark.parametrize(
    "kind,value,field",
    [
        ("api_key", "sk-abc\ud800defghijklmnop", "key"),
        ("bedrock", "bedrock-api-key-\udfffbcdefghij", "key"),
        ("azure", [{**CATALOG_CONFIG, "api_key": "azure-key-\ud83d"}], "key[0].api_key"),
        ("vertex", {**SERVICE_ACCOUNT, "private_key_id": "\ud800"}, "key.private_key_id"),
    ],
)
def test_lone_surrogate_in_every_shape_names_the_field(kind, value, field):
    with pytest.raises(ShapeError, match=rf"^{re.escape(field)} contains a lone surrogate"):
        parse_credential(kind=kind, value=value)


@pytest.mark.parametrize(
    "provider,good,bad,field",
    [
        ("openai", "sk-proj-abcdefghijklmnop", "sk-proj-\x00bcdefghijklmnop", "key"),
        ("openai", "sk-proj-abcdefghijklmnop", "sk-proj-\x1bbcdefghijklmnop", "key"),
        ("azure", [CATALOG_CONFIG], [{**CATALOG_CONFIG, "api_key": "k\x01" * 10}], "key[0].api_key"),
        ("amazon-bedrock", ACCESS_KEYS, {**ACCESS_KEYS, "secretAccessKey": "s\x00" * 20}, "key.secretAccessKey"),
        (
            "google-vertex",
            SERVICE_ACCOUNT,
            json.dumps({**SERVICE_ACCOUNT, "client_email": "a\ud800@b.com"}),
            "key.client_email",
        ),
    ],
)
def test_rotation_with_bad_material_is_400_and_keeps_the_stored_key(alice, providers, provider, good, bad, field):
    client = alice.client(management=True)
    created = post_raw(client, "/api/v1/byok", {"provider": provider, "key": good})
    assert created.status_code == 201, created.content
    record = created.json()["data"]
    row = ByokKey.objects.get(pk=record["id"])
    before = unseal(Sealed(key_id=row.key_id, blob=bytes(row.sealed)), aad=f"byok:{row.id}")
    response = post_raw(client, f"/api/v1/byok/{record['id']}", {"key": bad, "name": "renamed"}, method="patch")
    body = assert_error_envelope(response, 400)
    assert f"{field} " in body["error"]["message"]
    row.refresh_from_db()
    assert unseal(Sealed(key_id=row.key_id, blob=bytes(row.sealed)), aad=f"byok:{row.id}") == before
    assert row.name == "" and row.label == record["label"]  # nothing of the refused PATCH was applied


def test_pem_private_key_keeps_its_line_breaks(alice, providers):
    pem = "-----BEGIN PRIVATE KEY-----\r\nMIIE\r\nAbCd\r\n-----END PRIVATE KEY-----\n"
    key = {**SERVICE_ACCOUNT, "private_key": pem}
    created = post_raw(alice.client(management=True), "/api/v1/byok", {"provider": "google-vertex", "key": key})
    assert created.status_code == 201, created.content
    credentials = byok_credentials(key_id=created.json()["data"]["id"], model_id="openai/gpt-4o")
    assert credentials.extra["private_key"] == key["private_key"]


def test_seal_never_fails_on_a_string():
    for text in ["\ud800", "a\udfffb", "\x00", "é\U0001f600", "x" * 100_000]:
        sealed = seal(text, aad="test:\ud800")
        assert unseal(sealed, aad="test:\ud800") == text


def test_a_key_stored_before_the_checks_still_loads(alice, providers):
    """Rows written under the old rules are not re-judged when a request decrypts them (no 500 at routing);
    sending them fails as an attempt (routing/http/)."""
    from byok.services import byok_key_create

    legacy = ParsedCredential(material="sk-old\x01key-123456", label="sk-o...3456", api_key="sk-old\x01key-123456")
    key = byok_key_create(
        account_id=alice.account_id,
        workspace_id=alice.provisioned.workspace_id,
        provider="openai",
        kind="api_key",
        credential=legacy,
    )
    assert byok_credentials(key_id=key.id, model_id="openai/gpt-4o").api_key == "sk-old\x01key-123456"


@pytest.mark.parametrize(
    "plaintext,why",
    [
        ("sk-op\x00erator-key", "NUL"),
        ("sk-op\r\nerator-key", "whitespace"),
        ("sk-opé-rator-key", "printable ASCII"),
        ("sk-op\ud800erator", "lone surrogate"),
        ("k" * (MAX_SECRET_CHARS + 1), "longer than"),
    ],
)
def test_operator_credential_gets_the_same_checks(providers, plaintext, why):
    openai = Provider.objects.get(slug="openai")
    provider_credential_set(provider=openai, plaintext="sk-operator-good-key")
    with pytest.raises(ShapeError, match=why):
        provider_credential_set(provider=openai, plaintext=plaintext)
    openai.refresh_from_db()
    assert openai.credential_label == mask_secret("sk-operator-good-key")  # the good one is still there


def test_operator_vertex_service_account_is_checked_as_one(providers):
    vertex = Provider.objects.get(slug="google-vertex")
    provider_credential_set(provider=vertex, plaintext=json.dumps(SERVICE_ACCOUNT))
    with pytest.raises(ShapeError, match="key.private_key_id"):
        provider_credential_set(provider=vertex, plaintext=json.dumps({**SERVICE_ACCOUNT, "private_key_id": "a\nb"}))
    provider_credential_set(provider=vertex, plaintext="ya29.ready-made-access-token")  # a token is a plain key


@pytest.mark.parametrize(
    "row,why",
    [
        ({"slug": "x", "name": "X", "adapter": "openai_chat", "base_url": "ftp://x.example"}, "http or https"),
        ({"slug": "x", "name": "X", "adapter": "openai_chat", "base_url": "https://x.example/v\n1"}, "whitespace"),
        ({"slug": "X Y", "name": "X", "adapter": "openai_chat", "base_url": "https://x.example"}, "slug"),
        (
            {"slug": "x", "name": "X", "adapter": "openai_chat", "base_url": "https://x.example", "api_key_env": "A B"},
            "environment variable",
        ),
    ],
)
def test_catalog_loader_refuses_unusable_providers(db, row, why):
    with pytest.raises(CatalogError, match=why):
        catalog_load(data={"providers": [row]})
    assert not Provider.objects.filter(slug=row["slug"]).exists()


@pytest.mark.parametrize(
    "endpoint,why",
    [
        ({"pricing": {"prompt": -1, "completion": 1}}, "price_prompt"),
        ({"pricing": {"prompt": 1, "completion": 1, "cached_input": -0.5}}, "price_cached_input"),
        ({"pricing": {"prompt": 1, "completion": 1}, "context_length": 0}, "context_length"),
        ({"pricing": {"prompt": 1, "completion": 1}, "upstream_model": "a b"}, "upstream_model"),
    ],
)
def test_catalog_loader_refuses_unusable_endpoints(providers, endpoint, why):
    row = {"provider": "openai", "upstream_model": "m", **endpoint}
    with pytest.raises(CatalogError, match=why):
        catalog_load(data={"models": [{"id": "acme/m", "name": "M", "context_length": 10, "endpoints": [row]}]})
