from django.apps import AppConfig


class PluginsConfig(AppConfig):
    name = "plugins"
    verbose_name = "Plugins"
