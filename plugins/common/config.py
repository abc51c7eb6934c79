"""A plugin's settings for one request: the request's own `plugins` entry for it, else the account's default
for it (staff set defaults in the admin, management keys with PUT /plugins/defaults: plugins.selectors), else
nothing. A request's entry replaces the default whole (its options are not merged into the default's), and an
entry with `enabled: false`, the request's or the default's, turns the plugin off. The defaults come from a
per-process cache (no query per request)."""

from typing import Any

from plugins.selectors import plugin_defaults_for_account
from routing.stages import RequestContext


def plugin_entry(ctx: RequestContext, plugin_id: str) -> dict[str, Any] | None:
    """The entry that decides for this request (the request's, else the account's default), None when neither
    names the plugin."""
    entry = next((plugin for plugin in ctx.plugins if plugin["id"] == plugin_id), None)
    if entry is not None:
        return entry
    defaults = plugin_defaults_for_account(account_id=ctx.caller.account_id)
    return next((plugin for plugin in defaults if plugin["id"] == plugin_id), None)


def plugin_settings(ctx: RequestContext, plugin_id: str) -> dict[str, Any] | None:
    """The plugin's options when it is on for this request (its entry, `enabled` included), else None. Read it,
    never change it (a default's entry is shared by the account's requests)."""
    entry = plugin_entry(ctx, plugin_id)
    if entry is None:
        return None
    return entry if entry.get("enabled", True) else None


def plugin_mentioned(ctx: RequestContext, plugin_id: str) -> bool:
    """Whether the plugin is set explicitly for this request, by its own entry or by the account's default (an
    `enabled: false` entry counts: it turns off a plugin that is on by default, such as context-compression for
    small contexts)."""
    return plugin_entry(ctx, plugin_id) is not None
