from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "gateway.accounts"
    label = "accounts"
    verbose_name = "Accounts and API keys"

    def ready(self) -> None:
        # Connects the receivers that drop cached API keys when a key, account or member changes.
        from gateway.accounts import authentication  # noqa: F401
