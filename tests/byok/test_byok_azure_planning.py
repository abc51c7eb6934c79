"""Routing plans with Azure BYOK keys without decrypting them: which models a key's configs serve is kept in
the clear when the key is saved (and summarized once by a migration for keys saved before)."""

import importlib

import pytest
from django.apps import apps

import byok.selectors
from byok.models import ByokKey
from byok.selectors import byok_key_serves, byok_keys_for_routing
from byok.services import byok_key_create, byok_key_update
from byok.shapes import parse_credential
from tests.support import DEPLOYMENT

CATALOG = {"api_key": "azure-catalog-key-123", "resource_name": "acme-ai"}
summarize = importlib.import_module("byok.migrations.0002_serves_models").summarize_azure_keys


@pytest.fixture
def no_decryption(monkeypatch):
    def refuse(sealed, aad):
        raise AssertionError(f"{aad} was decrypted while planning")

    monkeypatch.setattr(byok.selectors, "unseal", refuse)


def azure_key(persona, configs) -> ByokKey:
    return byok_key_create(
        account_id=persona.account_id,
        workspace_id=persona.provisioned.workspace_id,
        provider="azure",
        kind="azure",
        credential=parse_credential(kind="azure", value=configs),
    )


def routing_info(persona):
    (info,) = byok_keys_for_routing(account_id=persona.account_id, workspace_id=persona.provisioned.workspace_id)
    return info


def test_a_deployment_key_serves_only_its_model_known_without_decrypting(alice, no_decryption):
    azure_key(alice, [DEPLOYMENT])
    info = routing_info(alice)
    assert byok_key_serves(key=info, model_id="openai/gpt-4o")
    assert not byok_key_serves(key=info, model_id="openai/gpt-4o-mini")


def test_a_catalog_config_serves_any_model_and_rotation_updates_the_summary(alice, no_decryption):
    key = azure_key(alice, [CATALOG, DEPLOYMENT])
    assert key.serves_models == ["openai/gpt-4o", "*"]
    assert byok_key_serves(key=routing_info(alice), model_id="meta/llama")
    byok_key_update(key=key, changes={}, credential=parse_credential(kind="azure", value=[DEPLOYMENT]))
    assert not byok_key_serves(key=routing_info(alice), model_id="meta/llama")


def test_keys_saved_before_are_summarized_by_the_migration(alice):
    key = azure_key(alice, [DEPLOYMENT])
    ByokKey.objects.filter(pk=key.pk).update(serves_models=None)
    assert byok_key_serves(key=routing_info(alice), model_id="meta/llama")  # unknown: its attempt finds out
    summarize(apps, None)
    assert ByokKey.objects.get(pk=key.pk).serves_models == ["openai/gpt-4o"]
