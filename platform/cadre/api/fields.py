"""Serializer fields shared by the apps' APIs."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rest_framework import serializers


class RegisteredChoiceField(serializers.ChoiceField):
    """A choice field over a callable (a registry filled in ``AppConfig.ready()``): DRF copies
    declared fields for every serializer it builds, so each request validates against the
    entries registered by then, not against a list frozen at import."""

    def __init__(self, choices: Callable[[], Iterable], **kwargs):
        super().__init__(choices=choices(), **kwargs)
