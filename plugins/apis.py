"""GET|PUT /plugins/defaults: the account's plugin defaults, for management keys."""

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.accounts.authentication import request_caller
from gateway.accounts.permissions import IsManagementKey
from gateway.api import error_responses
from gateway.query import query_params
from plugins.selectors import plugin_defaults_list
from plugins.serializers import PluginDefaultsEnvelopeSerializer, PluginDefaultsUpdateRequestSerializer
from plugins.services import plugin_defaults_replace


class PluginDefaultsApi(APIView):
    """Defaults apply to each request of the account that does not name the plugin; a request's entry (with
    `enabled: false` to turn a default off) replaces the default for that request."""

    permission_classes = [IsManagementKey]

    @extend_schema(
        operation_id="getPluginDefaults",
        tags=["Plugins"],
        responses={200: PluginDefaultsEnvelopeSerializer, **error_responses(401, 403, 429, 500)},
    )
    def get(self, request: Request) -> Response:
        query_params(request)
        rows = plugin_defaults_list(account_id=request_caller(request).account_id)
        return Response({"data": {"plugins": [row.entry() for row in rows]}})

    @extend_schema(
        operation_id="updatePluginDefaults",
        tags=["Plugins"],
        request=PluginDefaultsUpdateRequestSerializer,
        responses={200: PluginDefaultsEnvelopeSerializer, **error_responses(400, 401, 403, 429, 500)},
    )
    def put(self, request: Request) -> Response:
        body = PluginDefaultsUpdateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        rows = plugin_defaults_replace(
            account_id=request_caller(request).account_id, entries=body.validated_data["plugins"]
        )
        return Response({"data": {"plugins": [row.entry() for row in rows]}})
