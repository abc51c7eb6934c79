from rest_framework import serializers


class CreditsSerializer(serializers.Serializer):
    total_credits = serializers.FloatField(help_text="All credits ever added (USD).")
    total_usage = serializers.FloatField(help_text="All credits ever charged (USD).")


class CreditsEnvelopeSerializer(serializers.Serializer):
    data = CreditsSerializer()
