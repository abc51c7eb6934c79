from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from gateway.accounts.authentication import Caller
from gateway.errors import MSG_INFERENCE_ONLY, MSG_MANAGEMENT_ONLY


class IsManagementKey(BasePermission):
    message = MSG_MANAGEMENT_ONLY

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.user, Caller) and request.user.is_management


class IsInferenceKey(BasePermission):
    message = MSG_INFERENCE_ONLY

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.user, Caller) and not request.user.is_management
