"""The session, user and messages middleware are passed over on the model endpoints only (gateway/browser.py)."""

import pytest
from django.test import RequestFactory

from gateway import browser

CLASSES = [browser.SessionMiddleware, browser.AuthenticationMiddleware, browser.MessageMiddleware]


def chain(path: str):
    """The request as the view would see it after the three middleware, in settings order."""
    seen = {}

    def view(request):
        seen.update(
            session=hasattr(request, "session"), user=hasattr(request, "user"), messages=hasattr(request, "_messages")
        )
        from django.http import HttpResponse

        return HttpResponse("ok")

    handler = view
    for cls in reversed(CLASSES):
        handler = cls(handler)
    request = RequestFactory().post(path, data=b"{}", content_type="application/json")
    response = handler(request)
    return seen, response


@pytest.mark.parametrize("path", sorted(browser.MODEL_ENDPOINTS))
def test_model_endpoints_get_no_session_user_or_messages(path):
    seen, response = chain(path)
    assert seen == {"session": False, "user": False, "messages": False}
    assert not response.cookies


@pytest.mark.parametrize(
    "path", ["/admin/", "/api/v1/docs", "/api/v1/keys", "/api/v1/responses/x", "/api/v1/responsesx"]
)
def test_every_other_path_gets_them(db, path):
    seen, _ = chain(path)
    assert seen == {"session": True, "user": True, "messages": True}


def test_the_settings_use_them_in_place_of_djangos_own(settings):
    names = [name.rsplit(".", 1)[1] for name in settings.MIDDLEWARE if name.startswith("gateway.browser.")]
    assert names == ["SessionMiddleware", "AuthenticationMiddleware", "MessageMiddleware"]
    assert not any(
        name.startswith(("django.contrib.sessions", "django.contrib.auth", "django.contrib.messages"))
        for name in settings.MIDDLEWARE
    )
