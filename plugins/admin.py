from typing import Any

from django.contrib import admin

from gateway.admin_generics import ModelAdmin, ModelForm
from plugins.models import PluginDefault
from plugins.serializers import plugin_entries_check
from plugins.services import options


class PluginDefaultForm(ModelForm[PluginDefault]):
    """Validated as the API validates an entry (the request's serializer for the plugin; a plugin no stage
    honours is refused while enabled)."""

    class Meta:
        model = PluginDefault
        fields = ("account", "plugin_id", "enabled", "options")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        if not isinstance(cleaned.get("options"), dict):
            self.add_error("options", 'a JSON object of the plugin\'s options, e.g. {"pdf": {"engine": "native"}}')
            return cleaned
        entry = {**cleaned["options"], "id": cleaned["plugin_id"], "enabled": cleaned["enabled"]}
        valid, errors = plugin_entries_check([entry])
        for name, messages in (errors.get(0) or {}).items():
            self.add_error("plugin_id" if name == "id" else "options", f"{name}: {_text(messages)}")
        if valid:
            cleaned["options"] = options(valid[0])
        return cleaned


def _text(messages: object) -> str:
    if isinstance(messages, dict):
        return "; ".join(f"{key}: {_text(value)}" for key, value in messages.items())
    if isinstance(messages, list):
        return "; ".join(_text(item) for item in messages)
    return str(messages)


@admin.register(PluginDefault)
class PluginDefaultAdmin(ModelAdmin[PluginDefault]):
    form = PluginDefaultForm
    list_display = ("account", "plugin_id", "enabled", "updated_at")
    list_filter = ("plugin_id", "enabled")
    search_fields = ("account__name", "plugin_id")
    autocomplete_fields = ("account",)
