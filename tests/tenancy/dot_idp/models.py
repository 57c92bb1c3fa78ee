"""What the identity provider knows of a user beyond Django's User: whether it verified the
e-mail address, and an employee number (a custom claim)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Profile(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    email_verified = models.BooleanField(default=False)
    employee_no = models.CharField(max_length=64, blank=True, default="")

    def __str__(self) -> str:
        return f"profile of {self.user}"
