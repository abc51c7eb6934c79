from django.apps import AppConfig


class StandinConfig(AppConfig):
    """The local stand-in provider (`manage.py standin_provider`): installed by the development settings that
    `make run` uses (gateway/settings/dev.py) and by the tests' settings, never by the production settings."""

    name = "routing.standin"
    label = "standin"
    verbose_name = "Local stand-in provider (development and tests)"
