"""Request body parsers: JSON that every layer behind it can hold, or a 400.

Nesting is bounded (past it the code that walks a body — validation, masking, JSON columns —
could exhaust the interpreter's recursion limit). Text may not carry NUL characters or lone
surrogates (PostgreSQL stores neither, and a lone surrogate cannot even be written back in an
error message), and numbers must be finite (`1e309` parses as infinity, which no integer or
decimal column takes). Refused at the edge, each is a 400 `parse_error` naming the place,
instead of a 500 from whichever layer met it first.
"""

from __future__ import annotations

import math

from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Deeper than any body Cadre takes (tool schemas, metadata).
MAX_JSON_DEPTH = 64


def _text_problem(text: str) -> str | None:
    """Which problem a text has: "nul", "surrogate" or None."""
    if "\x00" in text:
        return "nul"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "surrogate"
    return None


def _value_problem(where: str, problem: str) -> str:
    if problem == "nul":
        return _("%(where)s contains a NUL character.") % {"where": where}
    return _("%(where)s contains a lone surrogate (not a character).") % {"where": where}


def _key_problem(where: str, problem: str) -> str:
    if problem == "nul":
        return _("A key of %(where)s contains a NUL character.") % {"where": where}
    return _("A key of %(where)s contains a lone surrogate (not a character).") % {"where": where}


def json_body_problem(value, limit: int = MAX_JSON_DEPTH) -> str | None:
    """What makes parsed JSON unusable, as a message naming where, or None; walked without
    recursion."""
    stack = [(value, 1, "body")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                return _value_problem(where, problem)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return _("%(where)s is not a finite number.") % {"where": where}
        elif isinstance(item, dict | list):
            if depth > limit:
                return _("The JSON body nests deeper than %(limit)s levels.") % {"limit": limit}
            if isinstance(item, dict):
                for key, child in item.items():
                    problem = _text_problem(key)
                    if problem:
                        return _key_problem(where, problem)
                    stack.append((child, depth + 1, f"{where}.{key}"[:200]))
            else:
                stack.extend(
                    (child, depth + 1, f"{where}[{index}]"[:200])
                    for index, child in enumerate(item)
                )
    return None


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser refusing what json_body_problem names: `[` x 50,000 (which the json
    module meets with RecursionError), nesting past MAX_JSON_DEPTH, NUL characters, lone
    surrogates and non-finite numbers are a 400 `parse_error`."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(_("The JSON body is nested too deeply.")) from None
        problem = json_body_problem(data)
        if problem:
            raise ParseError(problem)
        return data
