"""Issue 11: the API's content negotiation remembers its choice per Accept header. Whatever the header, the
choice equals DRF's own negotiation (JSON when DRF would answer 406), on a first call and on a remembered one."""

import pytest
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from gateway import api
from gateway.api import MEMO_MAX_ACCEPT, MEMO_MAX_ENTRIES, JsonFirstContentNegotiation

ACCEPT_HEADERS = [
    None,  # no header: */*
    "",
    "*/*",
    "application/json",
    "application/json; indent=4",
    "application/json;q=0.9, */*;q=0.1",
    "text/event-stream",
    "text/event-stream, application/json",
    "text/html",
    "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "application/*",
    "text/*",
    "application/vnd.api+json",
    "application/json; charset=utf-8",
    "not a media type",
    ",,,",
    "application/json, " * 40,  # over MEMO_MAX_ACCEPT: negotiated every time
]
RENDERER_SETS = [[JSONRenderer], [JSONRenderer, BrowsableAPIRenderer], [BrowsableAPIRenderer, JSONRenderer]]


def drf_choice(request, renderers, format_suffix=None):
    """What the negotiation answered before it remembered anything: DRF's, JSON instead of a 406."""
    try:
        return DefaultContentNegotiation().select_renderer(request, renderers, format_suffix)
    except NotAcceptable:
        return renderers[0], renderers[0].media_type


def make_request(accept, path="/api/v1/responses"):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    return Request(APIRequestFactory().post(path, {}, format="json", **headers))


@pytest.fixture(autouse=True)
def _empty_memo():
    api._chosen.clear()
    yield
    api._chosen.clear()


@pytest.mark.parametrize("classes", RENDERER_SETS, ids=lambda classes: "+".join(c.__name__ for c in classes))
@pytest.mark.parametrize("accept", ACCEPT_HEADERS)
def test_the_choice_is_drfs_first_and_when_remembered(accept, classes):
    negotiation = JsonFirstContentNegotiation()
    for _ in range(2):  # the second call answers from memory (for headers short enough to be remembered)
        renderers = [renderer() for renderer in classes]
        renderer, media_type = negotiation.select_renderer(make_request(accept), renderers)
        expected_renderer, expected_media_type = drf_choice(make_request(accept), renderers)
        assert renderer is expected_renderer
        assert media_type == expected_media_type
    assert len(api._chosen) == (0 if accept is not None and len(accept) > MEMO_MAX_ACCEPT else 1)


def test_the_same_header_with_other_renderers_is_chosen_again():
    negotiation = JsonFirstContentNegotiation()
    json_only = [JSONRenderer()]
    assert negotiation.select_renderer(make_request("text/html"), json_only) == (json_only[0], "application/json")
    both = [JSONRenderer(), BrowsableAPIRenderer()]
    assert negotiation.select_renderer(make_request("text/html"), both) == (both[1], "text/html")


@pytest.mark.parametrize("query", ["?format=json", "?format=api", "?x=1"])
def test_a_query_string_is_negotiated_in_full(query):
    negotiation = JsonFirstContentNegotiation()
    renderers = [JSONRenderer(), BrowsableAPIRenderer()]
    request = make_request("text/html", path=f"/api/v1/responses{query}")
    assert negotiation.select_renderer(request, renderers) == drf_choice(request, renderers)
    assert api._chosen == {}


def test_a_format_suffix_is_negotiated_in_full():
    negotiation = JsonFirstContentNegotiation()
    renderers = [JSONRenderer(), BrowsableAPIRenderer()]
    request = make_request("text/html")
    assert negotiation.select_renderer(request, renderers, "json") == (renderers[0], "application/json")
    assert api._chosen == {}


def test_an_unknown_format_is_still_404():
    from django.http import Http404

    with pytest.raises(Http404):
        JsonFirstContentNegotiation().select_renderer(
            make_request("application/json", path="/api/v1/responses?format=xml"), [JSONRenderer()]
        )


def test_the_memory_is_bounded():
    negotiation = JsonFirstContentNegotiation()
    for index in range(3 * MEMO_MAX_ENTRIES):
        renderers = [JSONRenderer()]
        accept = f"application/json; v={index}"
        assert negotiation.select_renderer(make_request(accept), renderers) == (renderers[0], accept)
        assert len(api._chosen) <= MEMO_MAX_ENTRIES


def test_api_answers_follow_the_accept_header(alice):
    """End to end: an indent asked for in Accept still indents, an SSE Accept still gets JSON, ?format=xml 404."""
    client = alice.client()
    plain = client.get("/api/v1/key", HTTP_ACCEPT="application/json")
    assert plain.status_code == 200 and plain["Content-Type"] == "application/json"
    assert b"\n" not in plain.content
    indented = client.get("/api/v1/key", HTTP_ACCEPT="application/json; indent=2")
    assert indented.status_code == 200 and indented.content.startswith(b'{\n  "data"')
    again = client.get("/api/v1/key", HTTP_ACCEPT="application/json; indent=2")  # remembered
    assert again.content == indented.content
    sse = client.get("/api/v1/key", HTTP_ACCEPT="text/event-stream")
    assert sse.status_code == 200 and sse["Content-Type"] == "application/json" and sse.json() == plain.json()
    assert client.get("/api/v1/key?format=xml").status_code == 404
