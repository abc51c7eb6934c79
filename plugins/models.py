from typing import Any

from django.db import models


class PluginDefault(models.Model):
    """An account's default for one plugin: applied to each of its requests that does not name the plugin (a
    request's entry, `enabled: false` included, replaces it). `options`: the plugin's fields besides `id` and
    `enabled`, as a request would send them (validated with the request's serializers when set)."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="plugin_defaults")
    plugin_id = models.CharField(max_length=40, help_text="The plugin's id, e.g. moderation, file-parser")
    enabled = models.BooleanField(default=True, help_text="Off: the plugin is off by default for the account")
    options = models.JSONField(
        default=dict, blank=True, help_text='The plugin\'s options, e.g. {"pdf": {"engine": "native"}}'
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["account_id", "plugin_id"]
        constraints = [models.UniqueConstraint(fields=["account", "plugin_id"], name="one_default_per_account_plugin")]

    def __str__(self) -> str:
        return f"{self.plugin_id} default of {self.account_id}"

    def entry(self) -> dict[str, Any]:
        """The default as a request's `plugins` entry."""
        return {**self.options, "id": self.plugin_id, "enabled": self.enabled}
