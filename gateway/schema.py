"""GET /openapi.json and /openapi.yaml: the OpenAPI schema, generated once per process and served as bytes.

drf-spectacular's own views generate the schema on every request (about 0.13 s of CPU for the JSON, 0.18 s for
the YAML, for anyone: the schema needs no key), so a few clients asking for it in a loop stalled every other
request on a worker. The schema depends only on the code and the settings (no versioning, no translations: see
SPECTACULAR_SETTINGS), so it is generated once, on the first request, with drf-spectacular's public generator, and
each rendering (JSON or YAML, per negotiated media type and indent) is kept as bytes with a strong ETag. A client
that sends the ETag back in If-None-Match gets a 304 without a body."""

import hashlib
import threading
from dataclasses import dataclass
from typing import Any, cast

from django.http import HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularYAMLAPIView
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

# Caches may keep the schema this long before they revalidate (a 304 then, while the deployment is the same).
SCHEMA_MAX_AGE_SECONDS = 300


@dataclass(frozen=True)
class RenderedSchema:
    body: bytes
    content_type: str
    etag: str  # quoted, strong: a hash of the body


_lock = threading.Lock()
_document: dict[str, Any] | None = None
# (renderer class, indent) -> bytes: at most 4 renderers x 9 indents (DRF bounds `indent` to 0-8).
_rendered: dict[tuple[type, int | None], RenderedSchema] = {}


def schema_document() -> dict[str, Any]:
    """The schema, generated on first use (concurrent first uses wait for one generation)."""
    global _document
    if _document is None:
        with _lock:
            if _document is None:
                # As `manage.py spectacular` does: no request (SERVE_PUBLIC, nothing depends on the caller).
                _document = SchemaGenerator().get_schema(request=None, public=True)
    return _document


def schema_cache_clear() -> None:
    """Forget the schema and its renderings (tests that count generations start from none)."""
    global _document
    with _lock:
        _document = None
        _rendered.clear()


def rendered_schema(renderer: BaseRenderer, media_type: str, context: dict[str, Any]) -> RenderedSchema:
    indent = renderer.get_indent(media_type, context) if isinstance(renderer, JSONRenderer) else None
    key = (type(renderer), indent)
    found = _rendered.get(key)
    if found is None:
        # drf-spectacular's JSON and YAML renderers both give bytes.
        body = cast(bytes, renderer.render(schema_document(), media_type, context))
        content_type = renderer.media_type + (f"; charset={renderer.charset}" if renderer.charset else "")
        found = RenderedSchema(body=body, content_type=content_type, etag=f'"{hashlib.sha256(body).hexdigest()}"')
        _rendered[key] = found
    return found


def matches(if_none_match: str, etag: str) -> bool:
    """If-None-Match uses the weak comparison (RFC 9110 13.1.2): `W/"x"` matches `"x"`; `*` matches anything."""
    tags = parse_etags(if_none_match)
    return "*" in tags or any(tag.removeprefix("W/") == etag for tag in tags)


def schema_response(view: APIView, request: Request) -> HttpResponse:
    """The negotiated rendering, or a 304 when the client has it; headers as drf-spectacular's view sends them."""
    renderer = request.accepted_renderer
    schema = rendered_schema(renderer, request.accepted_media_type, view.get_renderer_context())
    headers = {"ETag": schema.etag, "Cache-Control": f"public, max-age={SCHEMA_MAX_AGE_SECONDS}"}
    if matches(request.META.get("HTTP_IF_NONE_MATCH", ""), schema.etag):
        return HttpResponseNotModified(headers=headers)
    title = spectacular_settings.TITLE or "schema"
    headers["Content-Disposition"] = f'inline; filename="{title}.{renderer.format}"'
    return HttpResponse(schema.body, content_type=schema.content_type, headers=headers)


class CachedSchemaJSONView(SpectacularJSONAPIView):
    """drf-spectacular's view (its renderers, negotiation, permissions, no authentication), answered from the cache."""

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        return schema_response(self, request)


class CachedSchemaYAMLView(SpectacularYAMLAPIView):
    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        return schema_response(self, request)
