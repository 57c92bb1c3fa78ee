"""Send one logical request body as JSON, an HTML form (urlencoded) or multipart, as DRF reads them.

Form and multipart bodies cannot nest, so a dict field goes as `field.key` and a list of
objects as `field[0]key` (DRF's html parsing of DictField, ListField and many=True
serializers); lists of scalars repeat the key. Files (objects with `read`) only fit multipart.
"""

from __future__ import annotations

from urllib.parse import urlencode

FORMATS = ["json", "form", "multipart"]


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def flatten(data: dict, prefix: str = "") -> list[tuple[str, object]]:
    """(key, value) pairs of `data` in DRF's html notation; file objects are kept as they are."""
    pairs: list[tuple[str, object]] = []
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            pairs += flatten(value, name)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    pairs += [(f"{name}[{index}]{k}", v) for k, v in flatten(item)]
                else:
                    pairs.append((name, _scalar(item)))
        elif hasattr(value, "read"):
            pairs.append((name, value))
        else:
            pairs.append((name, _scalar(value)))
    return pairs


def has_file(data: dict) -> bool:
    return any(hasattr(value, "read") for value in data.values())


def post_as(client, url: str, data: dict, body_format: str):
    """POST `data` to `url` with a DRF test client, encoded as `body_format`."""
    if body_format == "json":
        return client.post(url, data, format="json")
    pairs = flatten(data)
    if body_format == "multipart":
        grouped: dict[str, list] = {}
        for key, value in pairs:
            grouped.setdefault(key, []).append(value)
        body = {key: values[0] if len(values) == 1 else values for key, values in grouped.items()}
        return client.post(url, body, format="multipart")
    assert body_format == "form", body_format
    return client.post(
        url, urlencode(pairs, doseq=True), content_type="application/x-www-form-urlencoded"
    )
