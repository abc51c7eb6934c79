from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "gateway.console"
    label = "console"
    verbose_name = "Console and operations"

    def ready(self) -> None:
        from gateway.billing.services import SETTLED_OBSERVERS
        from gateway.console.middleware import note_settled

        if note_settled not in SETTLED_OBSERVERS:
            SETTLED_OBSERVERS.append(note_settled)
