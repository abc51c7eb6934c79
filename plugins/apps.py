from django.apps import AppConfig


class PluginsConfig(AppConfig):
    name = "plugins"
    verbose_name = "Plugins"

    def ready(self) -> None:
        from plugins.registry import plugins_register  # the plugins import the models: not before the app is ready

        plugins_register()
