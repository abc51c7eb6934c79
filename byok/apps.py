from django.apps import AppConfig


class ByokConfig(AppConfig):
    name = "byok"
    verbose_name = "Provider keys (BYOK)"
