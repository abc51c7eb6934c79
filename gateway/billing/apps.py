from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "gateway.billing"
    label = "billing"
    verbose_name = "Credits and billing"
