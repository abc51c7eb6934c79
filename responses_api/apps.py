from django.apps import AppConfig


class ResponsesApiConfig(AppConfig):
    name = "responses_api"
    verbose_name = "Responses API"
