from django.conf import settings

from gateway.errors import MSG_BODY_TOO_LARGE, error_json_response, is_api_path


class ApiBodyLimitMiddleware:
    """Refuse over-large API bodies with 413 before anything reads them."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if is_api_path(request.path_info):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return error_json_response(400, "Invalid Content-Length header")
            limit = settings.MAX_REQUEST_BODY_BYTES
            if length > limit:
                return error_json_response(413, MSG_BODY_TOO_LARGE.format(limit=limit))
        return self.get_response(request)
