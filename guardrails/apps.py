from django.apps import AppConfig


class GuardrailsConfig(AppConfig):
    name = "guardrails"
    verbose_name = "Guardrails"

    def ready(self) -> None:
        # The receivers that bump the "guardrails" version on every change (cascades included).
        from guardrails import selectors  # noqa: F401
        from guardrails.limits import caller_limits
        from routing.limits import limits_register

        limits_register(caller_limits)  # GET /models hides what a caller's guardrails allow nothing of
