from django.apps import AppConfig


class VersionsConfig(AppConfig):
    name = "gateway.versions"
    label = "versions"
    verbose_name = "Cache versions"
