from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "gateway.accounts"
    label = "accounts"
    verbose_name = "Accounts and API keys"
