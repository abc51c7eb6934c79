"""Account plugin defaults as the management API and the admin take them: a list of `plugins` entries, each
validated with the request's own serializer for its plugin, and refused (400) for a plugin no configured stage
honours (as a request turning it on would be).

The request's plugin serializers and the set of honoured plugin ids belong to responses_api, which this app may
not import (sibling layers); the project wiring (gateway/urls.py) hands them over once with
`plugin_rules_install`, so nothing is moved or copied."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from gateway import fields

MSG_UNKNOWN = '"{id}" is not a known plugin; expected one of {known}'
MSG_UNAVAILABLE = "the plugin '{id}' is not available on this gateway; remove it or set \"enabled\": false"
MSG_UNKNOWN_FIELD = "is not a field of the plugin '{id}'"
MSG_DUPLICATE = "the plugin '{id}' is listed more than once"
MAX_ENTRIES = 16  # as many as a request's `plugins` (one per plugin id)
MSG_NOT_INSTALLED = "plugins.serializers.plugin_rules_install was not called (gateway/urls.py does it)"


@dataclass(frozen=True)
class PluginRules:
    serializers: Mapping[str, type[serializers.Serializer[Any]]]  # by plugin id: the request's serializer of an entry
    honoured: Callable[[], frozenset[str]]  # the plugin ids some configured stage honours


_installed: list[PluginRules] = []


def plugin_rules_install(
    *, serializers: Mapping[str, type[serializers.Serializer[Any]]], honoured: Callable[[], frozenset[str]]
) -> None:
    _installed[:] = [PluginRules(serializers=serializers, honoured=honoured)]


def _rules() -> PluginRules:
    if not _installed:
        raise ImproperlyConfigured(MSG_NOT_INSTALLED)
    return _installed[0]


def plugin_entries_validate(entries: list[Any]) -> list[dict[str, Any]]:
    """Each entry validated as a request's `plugins` entry (with `enabled`, true by default); a ValidationError
    naming the field (`[1].pdf.engine`) otherwise."""
    cleaned, errors = plugin_entries_check(entries)
    if errors:
        raise serializers.ValidationError(cast(Any, errors))
    return cleaned


def plugin_entries_check(entries: list[Any]) -> tuple[list[dict[str, Any]], dict[int, Any]]:
    """(the valid entries, the errors of the others by position)."""
    rules = _rules()
    honoured = rules.honoured()
    cleaned: list[dict[str, Any]] = []
    errors: dict[int, Any] = {}
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        plugin_id = entry.get("id") if isinstance(entry, dict) else None
        serializer_class = rules.serializers.get(plugin_id) if isinstance(plugin_id, str) else None
        if not isinstance(entry, dict) or plugin_id is None:
            errors[index] = {"id": "is required"}
        elif serializer_class is None:
            errors[index] = {"id": MSG_UNKNOWN.format(id=plugin_id, known=sorted(rules.serializers))}
        elif plugin_id in seen:
            errors[index] = {"id": MSG_DUPLICATE.format(id=plugin_id)}
        else:
            seen.add(str(plugin_id))
            serializer = serializer_class(data=entry)
            unknown = _unknown_fields(entry, serializer.fields)
            if unknown:  # the request's validation drops them; a stored default must not keep what it ignores
                errors[index] = {name: MSG_UNKNOWN_FIELD.format(id=plugin_id) for name in unknown}
                continue
            if not serializer.is_valid():
                errors[index] = serializer.errors
                continue
            valid = {**serializer.validated_data, "enabled": serializer.validated_data.get("enabled", True)}
            if valid["enabled"] and plugin_id not in honoured:
                errors[index] = {"id": MSG_UNAVAILABLE.format(id=plugin_id)}
            cleaned.append(_plain(valid))
    return cleaned, errors


def _unknown_fields(data: dict[str, Any], fields: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The names in `data` that no field takes, nested objects included (`pdf.engnie`), in order."""
    unknown = []
    for name, value in data.items():
        field = fields.get(name)
        if field is None:
            unknown.append(prefix + str(name))
        elif isinstance(field, serializers.Serializer) and isinstance(value, dict):
            unknown += _unknown_fields(value, field.fields, f"{prefix}{name}.")
    return sorted(unknown)


def _plain(value: Any) -> Any:
    """Validated data as plain JSON values (nested serializers give OrderedDicts)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


# An entry is validated as a `plugins` entry of POST /responses, so its schema is that one, by reference: the
# component responses_api's PluginsField declares (this app may not import it), discriminated by `id` (an empty or
# unknown id is outside the schema as it is a 400), each plugin with its own fields only.
ENTRY_SCHEMA = {"$ref": "#/components/schemas/Plugin"}


@extend_schema_field({"type": "array", "items": ENTRY_SCHEMA, "maxItems": MAX_ENTRIES})
class PluginDefaultEntriesField(fields.JSONField):
    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        data = super().to_internal_value(data)
        if not isinstance(data, list):
            raise serializers.ValidationError("must be an array of plugin entries")
        if len(data) > MAX_ENTRIES:
            raise serializers.ValidationError(f"at most {MAX_ENTRIES} entries (one per plugin)")
        return plugin_entries_validate(data)


class PluginDefaultsUpdateRequestSerializer(fields.ClosedSerializer):
    plugins = PluginDefaultEntriesField(
        help_text="The account's defaults, replacing the previous ones; [] removes them all"
    )


class PluginDefaultsSerializer(serializers.Serializer[Any]):
    plugins = PluginDefaultEntriesField(help_text="Applied to each request that does not name the plugin")


class PluginDefaultsEnvelopeSerializer(serializers.Serializer[Any]):
    data = PluginDefaultsSerializer()  # type: ignore[assignment]  # the envelope's field shadows Serializer.data
