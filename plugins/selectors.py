"""Account plugin defaults as the request path reads them: per account, from an in-process cache that every
change drops within CACHE_VERSION_CHECK_SECONDS in every process (the "plugin_defaults" version counter), so a
request runs no query for them in the steady state."""

from typing import Any
from uuid import UUID

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from gateway.versions.counters import VersionedCache, version_bump
from plugins.models import PluginDefault

VERSION = "plugin_defaults"
MAX_CACHED_ACCOUNTS = 8192

_defaults: VersionedCache[UUID, tuple[dict[str, Any], ...]] = VersionedCache(VERSION, max_entries=MAX_CACHED_ACCOUNTS)


def plugin_defaults_for_account(*, account_id: UUID) -> tuple[dict[str, Any], ...]:
    """The account's defaults as `plugins` entries (`id`, `enabled` and the options); () when it has none. The
    entries are shared: read them, never change them."""
    return _defaults.get_or_load(account_id, _load) or ()


def _load(account_id: UUID) -> tuple[dict[str, Any], ...]:
    return tuple(row.entry() for row in PluginDefault.objects.filter(account_id=account_id).order_by("plugin_id"))


def plugin_defaults_list(*, account_id: UUID) -> list[PluginDefault]:
    """The account's defaults as stored (the management API and the admin read these, uncached)."""
    return list(PluginDefault.objects.filter(account_id=account_id).order_by("plugin_id"))


@receiver([post_save, post_delete], sender=PluginDefault)
def _bump_version(sender: type[PluginDefault], **kwargs: Any) -> None:
    """Saves and deletes (the admin's, the API's, and the cascade of a deleted account)."""
    version_bump(VERSION)
