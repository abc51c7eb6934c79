"""Every GET under /api/v1 refuses a query parameter it does not take with a 400 naming it (issue 29): `?limt=10`
was a 200 with the default page. Parametrized over the resolver's GET routes, so a new GET route without an
entry in ROUTES fails here. The parameters a route takes are the ones the OpenAPI document lists for it; the
openrouter SDK's parameters the gateway cannot honour are refused with the reason (gateway/query.py)."""

import functools
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from gateway.accounts.models import ApiKey
from gateway.query import MSG_REPEATED_PARAMETER, MSG_UNKNOWN_PARAMETER
from gateway.urls import api_v1
from tests.support import assert_error_envelope

# drf-spectacular's own views (the OpenAPI document and its viewers) take their `lang`/`format` parameters.
SCHEMA_VIEWS = {"schema", "schema-yaml", "swagger-ui", "redoc"}
PAGING = {"offset", "limit"}
MODEL_FILTERS = {"q", "supported_parameters", "input_modalities", "output_modalities", "providers"}
# route name -> (whether a management key calls it, the query parameters it takes)
ROUTES: dict[str, tuple[bool, set[str]]] = {
    "keys": (True, {"workspace_id", "include_disabled", "include_expired"} | PAGING),
    "key-detail": (True, set()),
    "current-key": (False, set()),
    "credits": (True, set()),
    "generation": (False, {"id"}),
    "activity": (True, {"date", "api_key_hash", "workspace_id", "group_by"}),
    "models": (False, MODEL_FILTERS | PAGING),
    "models-user": (False, MODEL_FILTERS | PAGING),
    "models-count": (False, MODEL_FILTERS),
    "model-endpoints": (False, set()),
    "model-retrieve": (False, set()),
    "model-get": (False, set()),
    "providers": (False, set()),
    "byok": (True, {"provider", "workspace_id"} | PAGING),
    "byok-detail": (True, set()),
    "routing-settings": (True, set()),
    "plugin-defaults": (True, set()),
    "guardrails": (True, {"workspace_id"} | PAGING),
    "guardrail-key-assignments-all": (True, PAGING),
    "guardrail-member-assignments-all": (True, PAGING),
    "guardrail-detail": (True, set()),
    "guardrail-key-assignments": (True, PAGING),
    "guardrail-member-assignments": (True, PAGING),
}
# A value each parameter accepts (the filters match nothing or everything: only acceptance is tested).
VALID = {
    "offset": "0",
    "limit": "5",
    "q": "gpt",
    "supported_parameters": "tools",
    "input_modalities": "text",
    "output_modalities": "text",
    "providers": "openai",
    "workspace_id": "00000000-0000-0000-0000-000000000000",
    "include_disabled": "true",
    "include_expired": "false",
    "id": "gen-unknown",
    "api_key_hash": "0" * 64,
    "group_by": "workspace",
    "provider": "openai",
}


def get_routes() -> list[tuple[str, str]]:
    """(name, pattern) of each GET route under /api/v1, the schema views aside."""
    routes = []
    for pattern in api_v1:
        view = getattr(pattern.callback, "view_class", None)
        if view is not None and hasattr(view, "get") and pattern.name not in SCHEMA_VIEWS:
            routes.append((pattern.name, str(pattern.pattern)))
    return routes


def schema_path(pattern: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", pattern)  # the document trims /api/v1 (its server URL)


@pytest.fixture
def made(alice, providers):
    """One of each record a GET route names in its path."""
    client = alice.client(management=True)
    byok = client.post("/api/v1/byok", {"provider": "openai", "key": "sk-proj-abcdefghijklmnop"}, format="json")
    guardrail = client.post("/api/v1/guardrails", {"name": "g"}, format="json")
    assert byok.status_code == 201 and guardrail.status_code == 201, (byok.content, guardrail.content)
    return {
        "key_hash": alice.provisioned.inference_key.key.hash,
        "byok_id": byok.json()["data"]["id"],
        "guardrail_id": guardrail.json()["data"]["id"],
        "author": "openai",
        "slug": "gpt-4o",
    }


def url_of(pattern: str, made: dict) -> str:
    return "/api/v1/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(made[m.group(1)]), pattern)


def call(alice, name: str, url: str, query: str):
    management, _ = ROUTES[name]
    return alice.client(management=management).get(f"{url}?{query}" if query else url)


def test_every_get_route_is_listed_here():
    assert {name for name, _ in get_routes()} == set(ROUTES)


@pytest.mark.parametrize(("name", "pattern"), get_routes())
def test_an_unknown_query_parameter_is_400_naming_it(alice, made, name, pattern):
    url = url_of(pattern, made)
    taken = ROUTES[name][1]
    values = {**VALID, "date": timezone.now().date().isoformat()}
    accepted = "&".join(f"{param}={values[param]}" for param in sorted(taken))
    ok = call(alice, name, url, accepted)
    assert ok.status_code == (404 if name == "generation" else 200), ok.content  # no such generation
    body = assert_error_envelope(call(alice, name, url, f"{accepted}&limt=10".lstrip("&")), 400)
    assert body["error"]["metadata"]["fields"] == {"limt": MSG_UNKNOWN_PARAMETER}
    assert body["error"]["message"].startswith("limt: unknown query parameter")


@functools.cache
def openapi() -> dict:
    return Client().get("/api/v1/openapi.json").json()


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "pattern"), get_routes())
def test_the_openapi_document_lists_the_parameters_each_route_takes(name, pattern):
    operation = openapi()["paths"][schema_path(pattern)]["get"]
    listed = {param["name"] for param in operation.get("parameters", []) if param["in"] == "query"}
    assert listed == ROUTES[name][1]


def test_a_parameter_given_twice_is_400(alice):
    response = alice.client(management=True).get("/api/v1/keys?limit=1&limit=2")
    assert assert_error_envelope(response, 400)["error"]["metadata"]["fields"] == {"limit": MSG_REPEATED_PARAMETER}


@pytest.mark.parametrize(
    ("url", "param", "management"),
    [
        ("/api/v1/models?offset=0&limit=500&category=programming", "category", False),
        ("/api/v1/models/user?sort=newest", "sort", False),
        ("/api/v1/models/count?zdr=true", "zdr", False),
        ("/api/v1/models?min_coding_index=0.5", "min_coding_index", False),
        ("/api/v1/activity?user_id=u1", "user_id", True),
    ],
)
def test_an_sdk_parameter_the_gateway_cannot_honour_is_400_saying_why(alice, url, param, management):
    fields = assert_error_envelope(alice.client(management=management).get(url), 400)["error"]["metadata"]["fields"]
    assert list(fields) == [param] and fields[param].startswith("not supported: ")


def test_include_expired_false_leaves_out_expired_keys(alice):
    client = alice.client(management=True)
    made = client.post("/api/v1/keys", {"name": "old"}, format="json").json()["data"]
    ApiKey.objects.filter(hash=made["hash"]).update(expires_at=timezone.now() - timedelta(seconds=1))

    def listed(query: str) -> set[str]:
        return {key["hash"] for key in client.get(f"/api/v1/keys{query}").json()["data"]}

    assert made["hash"] in listed("") and made["hash"] in listed("?include_expired=true")
    assert made["hash"] not in listed("?include_expired=false")
    assert listed("?include_expired=false")  # the live keys stay


def test_activity_group_by_takes_workspace_only(alice):
    client = alice.client(management=True)
    assert client.get("/api/v1/activity?group_by=workspace").status_code == 200
    fields = assert_error_envelope(client.get("/api/v1/activity?group_by=model"), 400)["error"]["metadata"]["fields"]
    assert list(fields) == ["group_by"]
