from django.db import models


class Version(models.Model):
    """The authoritative value of one named counter, shared by every process through the database."""

    name = models.CharField(max_length=40, primary_key=True)
    value = models.CharField(max_length=32)

    def __str__(self) -> str:
        return f"{self.name}={self.value}"
