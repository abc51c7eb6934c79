"""The model endpoints authenticate with an API key: with Django's own session, user and messages middleware in
the stack, their answers still set no cookie and do not vary on Cookie (no session is touched)."""

import json

import pytest
from django.test import Client

MODEL_ENDPOINTS = ["/api/v1/responses", "/api/v1/chat/completions", "/api/v1/messages", "/api/v1/embeddings"]


@pytest.mark.parametrize("path", MODEL_ENDPOINTS)
def test_a_model_endpoint_answer_sets_no_cookie(db, path):
    client = Client()
    client.cookies["sessionid"] = "not-a-session"  # a browser that has an admin session cookie for this host
    response = client.post(path, json.dumps({}), content_type="application/json")
    assert response.status_code == 401  # no API key
    assert not response.cookies
    assert "cookie" not in response.get("Vary", "").lower()


def test_the_admin_still_gets_its_session_and_user(db, django_user_model):
    django_user_model.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    client = Client()
    assert client.get("/admin/").status_code == 302  # anonymous: to the login page (needs request.user)
    assert client.login(username="root", password="pw-for-tests-only")
    response = client.get("/admin/")
    assert response.status_code == 200  # the session cookie is read back into a user
