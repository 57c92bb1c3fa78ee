"""Serializer fields shared by the apps' APIs."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rest_framework import serializers

from cadre.api.parsers import MAX_JSON_DEPTH, json_body_problem, json_too_deep


class RegisteredChoiceField(serializers.ChoiceField):
    """A choice field over a callable (a registry filled in ``AppConfig.ready()``): DRF copies
    declared fields for every serializer it builds, so each request validates against the
    entries registered by then, not against a list frozen at import."""

    def __init__(self, choices: Callable[[], Iterable], **kwargs):
        super().__init__(choices=choices(), **kwargs)


class BoundedJSONField(serializers.JSONField):
    """DRF's JSONField holding to what BoundedJSONParser holds a JSON body to. In a form or
    multipart body DRF reads the field's value as JSON text itself, past every parser: `[` x
    100,000 would be a RecursionError, `"a\\u0000b"`, `"\\ud800"`, `NaN` and `1e309` values no
    JSON column stores. Each is refused as this field's error (400 `invalid`)."""

    def to_internal_value(self, data):
        try:
            value = super().to_internal_value(data)
        except RecursionError:
            raise serializers.ValidationError(json_too_deep(self.field_name)) from None
        problem = json_body_problem(value, MAX_JSON_DEPTH, root=self.field_name)
        if problem:
            raise serializers.ValidationError(problem)
        return value
