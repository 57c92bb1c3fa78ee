"""Parse identifiers that arrive as text (URL segments, query parameters, JSON values).

`str.isdigit()` is true for "²" and "١٢", which `int()` then rejects or reads as another
number, and a long run of ASCII digits overflows PostgreSQL's bigint: both were 500s. Every
place that turns a client's text into a primary key goes through `parse_pk`.
"""

from __future__ import annotations

# PostgreSQL's bigint; Django's BigAutoField and AutoField keys both fit below it.
MAX_PK = 2**63 - 1


def parse_pk(value: object) -> int | None:
    """The positive integer `value` spells in ASCII digits (an int is taken as it is), else None.

    Booleans, floats, signs, spaces, non-ASCII digits and values past bigint are not keys."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and 0 < len(value) <= 19 and value.isascii() and value.isdigit():
        number = int(value)
    else:
        return None
    return number if 0 < number <= MAX_PK else None


def parse_pks(values: object) -> list[int]:
    """The keys among `values` (an iterable of text or ints), in order, without repeats; the
    rest are dropped."""
    if isinstance(values, str | bytes) or not hasattr(values, "__iter__"):
        return []
    keys = (parse_pk(value) for value in values)
    return list(dict.fromkeys(key for key in keys if key is not None))
