"""Closed query strings: a GET operation refuses a query parameter it does not take, as bodies refuse fields.

DRF's serializers skip the names they do not declare, so `?limt=10` was a 200 with the default page size and
`?include_disabeld=false` listed the disabled keys. Every GET under /api/v1 reads its query through
`query_params` with a `ClosedQuerySerializer` (`NoQuerySerializer` when it takes none), so a misspelt or
unsupported name is a 400 naming it. A parameter an official SDK can send but the gateway cannot honour is
listed in `refused` with the reason, so the caller learns why rather than that the name is unknown.

Declared fields are the parameters the OpenAPI document lists (`extend_schema(parameters=[...])`); `refused`
names are left out of it, as they are not taken.
"""

from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework import serializers
from rest_framework.request import Request

MSG_UNKNOWN_PARAMETER = "unknown query parameter: not one this operation takes (nothing sent is ignored)"
MSG_REPEATED_PARAMETER = "given more than once: this parameter takes one value"
MAX_REPORTED = 20


class ClosedQuerySerializer(serializers.Serializer[Any]):
    # Query parameter name -> why this gateway refuses it (an official SDK's parameter it cannot honour).
    refused: ClassVar[dict[str, str]] = {}

    def to_internal_value(self, data: Any) -> Any:
        problems = self._unaccepted(data)
        if problems:
            raise serializers.ValidationError(problems)
        return super().to_internal_value(data)

    def _unaccepted(self, data: Mapping[str, Any]) -> dict[str, str]:
        """Names this operation does not take, and names given more than once (only one value would be read)."""
        problems: dict[str, str] = {}
        for name in data:
            if len(problems) >= MAX_REPORTED:
                break
            if name in self.refused:
                problems[str(name)] = self.refused[name]
            elif name not in self.fields:
                problems[str(name)] = MSG_UNKNOWN_PARAMETER
            elif hasattr(data, "getlist") and len(data.getlist(name)) > 1:
                problems[str(name)] = MSG_REPEATED_PARAMETER
        return problems


class NoQuerySerializer(ClosedQuerySerializer):
    """The query of an operation that takes no query parameters."""


def query_params(request: Request, serializer_class: type[ClosedQuerySerializer] = NoQuerySerializer) -> dict[str, Any]:
    """The validated query parameters of a GET request (a 400 naming any parameter not taken)."""
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)
