"""A plugin's settings for one request: the request's own `plugins` entry for it, else the account's default
for it (staff set defaults in the admin, management keys through the API), else nothing. An entry with
`enabled: false` turns the plugin off for the request whatever the default."""

from routing.stages import RequestContext


def plugin_settings(ctx: RequestContext, plugin_id: str) -> dict | None:
    """The plugin's options when it is on for this request (its entry, `enabled` included), else None."""
    entry = next((plugin for plugin in ctx.plugins if plugin["id"] == plugin_id), None)
    if entry is None:
        return None
    return entry if entry.get("enabled", True) else None


def plugin_mentioned(ctx: RequestContext, plugin_id: str) -> bool:
    """Whether the request names the plugin at all (an `enabled: false` entry counts: it turns a default off)."""
    return any(plugin["id"] == plugin_id for plugin in ctx.plugins)
