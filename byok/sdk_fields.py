"""The openrouter SDK's BYOK key fields (`is_byok_only`, `is_required`, `declared_region`, `declared_zdr`) on the
gateway's own model.

`is_byok_only` and `is_required` are two views of `shared_capacity` (rule 5, byok.models.SharedCapacity), which
routing already honours, so they need no column of their own and cannot disagree with it:
- `is_byok_only` = `never`: the operator's endpoints on the key's provider are never used for this caller, for any
  model (after the caller's keys fail, the provider is skipped rather than charged to the operator's key);
- `is_required` = `outside_filter` or `never`: the models the key applies to run only on the caller's keys.
`declared_region` and `declared_zdr` are always null (undeclared): this gateway has no regional hosts and its ZDR
routing reads the catalog's endpoint policy only, so a declaration would be accepted and ignored; it is refused."""

from typing import Any

from rest_framework import serializers

from byok.models import SharedCapacity

FLAGS = ("is_byok_only", "is_required")
MSG_REGION = "must be null: this gateway has no regional hosts, so a declared region would change nothing"
MSG_ZDR = "must be null: routing takes ZDR from the catalog's endpoint policy, not from a key's declaration"
MSG_FALLBACK = "cannot be combined with is_fallback: a byok-only key is the provider's only route, not a fallback"
MSG_DISAGREES = "disagrees with shared_capacity {capacity!r} sent with it; send one of them"


def record_flags(shared_capacity: str) -> dict[str, bool | None]:
    return {
        "is_byok_only": shared_capacity == SharedCapacity.NEVER,
        "is_required": shared_capacity != SharedCapacity.ALWAYS,
        "declared_region": None,
        "declared_zdr": None,
    }


def capacity_from_flags(
    data: dict[str, Any], *, current: str, capacity_sent: bool, is_fallback: bool
) -> dict[str, Any]:
    """`data` (validated) with the SDK's flags folded into `shared_capacity`; a 400 naming the field when they
    cannot be honoured. `current`: the key's capacity now ("always" for a new key)."""
    data = dict(data)
    if data.pop("declared_region", None) is not None:
        raise serializers.ValidationError({"declared_region": MSG_REGION})
    if data.pop("declared_zdr", None) is not None:
        raise serializers.ValidationError({"declared_zdr": MSG_ZDR})
    sent = {flag: data.pop(flag) for flag in FLAGS if flag in data}
    if not sent:
        return data
    now = record_flags(data["shared_capacity"] if capacity_sent else current)
    byok_only = sent.get("is_byok_only", now["is_byok_only"])
    required = sent.get("is_required", now["is_required"])
    capacity = (
        SharedCapacity.NEVER if byok_only else SharedCapacity.OUTSIDE_FILTER if required else SharedCapacity.ALWAYS
    )
    if capacity_sent and capacity != data["shared_capacity"]:
        flag = next(iter(sent))
        raise serializers.ValidationError({flag: MSG_DISAGREES.format(capacity=data["shared_capacity"])})
    if sent.get("is_byok_only") and data.get("is_fallback", is_fallback):
        raise serializers.ValidationError({"is_byok_only": MSG_FALLBACK})
    data["shared_capacity"] = capacity.value
    return data
