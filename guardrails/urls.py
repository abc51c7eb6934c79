"""/api/v1/guardrails..., included from gateway/urls.py."""

from django.urls import path

from guardrails.apis import (
    GuardrailDetailApi,
    GuardrailKeyAssignmentsApi,
    GuardrailKeyUnassignApi,
    GuardrailListCreateApi,
    GuardrailMemberAssignmentsApi,
    GuardrailMemberUnassignApi,
    KeyAssignmentsApi,
    MemberAssignmentsApi,
)

urlpatterns = [
    path("guardrails", GuardrailListCreateApi.as_view(), name="guardrails"),
    path("guardrails/assignments/keys", KeyAssignmentsApi.as_view(), name="guardrail-key-assignments-all"),
    path("guardrails/assignments/members", MemberAssignmentsApi.as_view(), name="guardrail-member-assignments-all"),
    path("guardrails/<uuid:guardrail_id>", GuardrailDetailApi.as_view(), name="guardrail-detail"),
    path(
        "guardrails/<uuid:guardrail_id>/assignments/keys",
        GuardrailKeyAssignmentsApi.as_view(),
        name="guardrail-key-assignments",
    ),
    path(
        "guardrails/<uuid:guardrail_id>/assignments/keys/remove",
        GuardrailKeyUnassignApi.as_view(),
        name="guardrail-key-unassign",
    ),
    path(
        "guardrails/<uuid:guardrail_id>/assignments/members",
        GuardrailMemberAssignmentsApi.as_view(),
        name="guardrail-member-assignments",
    ),
    path(
        "guardrails/<uuid:guardrail_id>/assignments/members/remove",
        GuardrailMemberUnassignApi.as_view(),
        name="guardrail-member-unassign",
    ),
]
