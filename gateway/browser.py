"""The admin's and the docs' middleware (sessions, users, messages), passed over on the model endpoints.

The model endpoints (POST /api/v1/responses, chat/completions, messages, embeddings) authenticate with an API key,
set no cookie and render no page: a session, a lazy user and message storage do nothing for them, yet cost about
40 µs per request (the messages middleware builds its storage and a signer every time). Each class here is Django's
own, skipped on exactly those paths and nowhere else. Django's admin checks accept these subclasses in MIDDLEWARE;
CSRF stays Django's own class (the deployment check looks for it by name; the API's views are csrf-exempt)."""

from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions

MODEL_ENDPOINTS = frozenset({"/api/v1/responses", "/api/v1/chat/completions", "/api/v1/messages", "/api/v1/embeddings"})


class _PassedOverOnModelEndpoints:
    def __call__(self, request):
        if request.path_info in MODEL_ENDPOINTS:
            return self.get_response(request)  # type: ignore[attr-defined]  # the Django middleware mixed in
        return super().__call__(request)  # type: ignore[misc]  # the Django middleware mixed in


class SessionMiddleware(_PassedOverOnModelEndpoints, sessions.SessionMiddleware):
    pass


class AuthenticationMiddleware(_PassedOverOnModelEndpoints, auth.AuthenticationMiddleware):
    pass


class MessageMiddleware(_PassedOverOnModelEndpoints, messages.MessageMiddleware):
    pass
