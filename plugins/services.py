"""Writes of account plugin defaults. Each change bumps the "plugin_defaults" version (plugins.selectors), so
every process serves the new defaults within CACHE_VERSION_CHECK_SECONDS. Entries are validated before they
come here (plugins.serializers)."""

from typing import Any
from uuid import UUID

from django.db import transaction

from gateway.versions.counters import version_bump
from plugins.models import PluginDefault
from plugins.selectors import VERSION


def plugin_defaults_replace(*, account_id: UUID, entries: list[dict[str, Any]]) -> list[PluginDefault]:
    """The account's defaults become `entries` (validated `plugins` entries; at most one per plugin id)."""
    with transaction.atomic():
        PluginDefault.objects.filter(account_id=account_id).delete()
        rows = PluginDefault.objects.bulk_create(
            PluginDefault(
                account_id=account_id, plugin_id=entry["id"], enabled=entry["enabled"], options=options(entry)
            )
            for entry in entries
        )
        version_bump(VERSION)  # bulk_create sends no post_save
    return sorted(rows, key=lambda row: row.plugin_id)


def options(entry: dict[str, Any]) -> dict[str, Any]:
    """A validated entry's options: everything but `id` and `enabled`."""
    return {name: value for name, value in entry.items() if name not in ("id", "enabled")}
