from rest_framework.permissions import BasePermission

from gateway.errors import MSG_INFERENCE_ONLY, MSG_MANAGEMENT_ONLY


class IsManagementKey(BasePermission):
    message = MSG_MANAGEMENT_ONLY

    def has_permission(self, request, view) -> bool:
        return bool(getattr(request.user, "is_authenticated", False) and request.user.is_management)


class IsInferenceKey(BasePermission):
    message = MSG_INFERENCE_ONLY

    def has_permission(self, request, view) -> bool:
        return bool(getattr(request.user, "is_authenticated", False) and not request.user.is_management)
