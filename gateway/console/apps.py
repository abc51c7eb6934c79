from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "gateway.console"
    label = "console"
    verbose_name = "Console and operations"
