"""Typed readers for environment variables: every setting comes through one of these.

Each helper fails at start-up with ImproperlyConfigured naming the variable, so a typo in a
deployment shows up as "CADRE_X: expected an integer, got 'ten'" rather than as odd behaviour.
Secrets also accept a `<NAME>_FILE` variant pointing at a file (Docker/Kubernetes secrets).
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_RATE = re.compile(r"^(?P<count>\d+)/(?P<multiple>\d*)(?P<unit>[smhd])[a-z]*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return value.strip() if value is not None else None


def env_str(name: str, default: str | None = None) -> str | None:
    value = _raw(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool = False) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected a boolean (true/false/1/0/yes/no), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {number}")
    return number


def env_float(
    name: str, default: float, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a number, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}: must be at most {maximum}, got {number}")
    return number


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    value = _raw(name)
    if value is None or value == "":
        return list(default or [])
    return [item.strip() for item in value.split(",") if item.strip()]


def env_url(name: str, default: str | None = None, *, schemes: tuple[str, ...] = ()) -> str | None:
    value = env_str(name, default)
    if value is None:
        return None
    parts = urlsplit(value)
    if not parts.scheme or not (parts.netloc or parts.path):
        raise ImproperlyConfigured(f"{name}: expected a URL like scheme://host/..., got {value!r}")
    if schemes and parts.scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name}: URL scheme must be one of {', '.join(schemes)}, got {parts.scheme!r}"
        )
    return value


def env_secret(name: str, default: str | None = None) -> str | None:
    """A secret from NAME, or from the file named by NAME_FILE (not both)."""
    direct = env_str(name)
    file_name = env_str(f"{name}_FILE")
    if direct and file_name:
        raise ImproperlyConfigured(f"{name}: set either {name} or {name}_FILE, not both")
    if file_name:
        try:
            with open(file_name, encoding="utf-8") as handle:
                content = handle.read().strip()
        except OSError as error:
            raise ImproperlyConfigured(
                f"{name}_FILE: cannot read {file_name!r}: {error.strerror}"
            ) from None
        if not content:
            raise ImproperlyConfigured(f"{name}_FILE: file {file_name!r} is empty")
        return content
    return direct if direct else default


def parse_rate(rate: str) -> tuple[int, int]:
    """'600/minute' -> (600, 60); '10/15m' -> (10, 900). Raises ValueError otherwise."""
    match = _RATE.match(rate.strip().lower())
    if match is None or int(match["count"]) < 1:
        raise ValueError(
            f"{rate!r} is not a rate: write <count>/<period>, e.g. 600/minute, 20/5m, 1000/day"
        )
    seconds = _UNIT_SECONDS[match["unit"]] * int(match["multiple"] or 1)
    return int(match["count"]), seconds


def env_rate(name: str, default: str) -> str:
    """A rate limit, <count>/<period> (600/minute, 20/5m, 10000/day; see parse_rate)."""
    value = env_str(name, default)
    try:
        parse_rate(value)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name}: {error}") from None
    return value
