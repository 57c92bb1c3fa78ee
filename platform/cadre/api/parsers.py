"""Request body parsers: JSON that every layer behind it can hold, or a 400.

Nesting is bounded (past it the code that walks a body — validation, masking, JSON columns —
could exhaust the interpreter's recursion limit). Text may not carry NUL characters or lone
surrogates (PostgreSQL stores neither, and a lone surrogate cannot even be written back in an
error message), and numbers must be finite (`1e309` parses as infinity, which no integer or
decimal column takes). Refused at the edge, each is a 400 `parse_error` naming the place,
instead of a 500 from whichever layer met it first.

Form and multipart bodies get the same text checks on every field name and value (a form value
reaches the same columns a JSON string does, and `charset=utf-7` decodes `+2AA-` to a lone
surrogate).
"""

from __future__ import annotations

import math

from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

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


def text_problem_in(value) -> str | None:
    """The first problem ("nul", "surrogate") of any string, key or value, in parsed JSON or
    YAML, or None. Walked without recursion (its parser bounded the depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                return problem
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _value_problem(where: str, problem: str) -> str:
    if problem == "nul":
        return _("%(where)s contains a NUL character.") % {"where": where}
    return _("%(where)s contains a lone surrogate (not a character).") % {"where": where}


def _key_problem(where: str, problem: str) -> str:
    if problem == "nul":
        return _("A key of %(where)s contains a NUL character.") % {"where": where}
    return _("A key of %(where)s contains a lone surrogate (not a character).") % {"where": where}


def json_too_deep(where: str, limit: int = MAX_JSON_DEPTH) -> str:
    if where == "body":
        return _("The JSON body nests deeper than %(limit)s levels.") % {"limit": limit}
    return _("%(where)s nests deeper than %(limit)s levels.") % {"where": where, "limit": limit}


def json_body_problem(value, limit: int = MAX_JSON_DEPTH, root: str = "body") -> str | None:
    """What makes parsed JSON unusable, as a message naming where (from `root`, the value's
    name), or None; walked without recursion."""
    stack = [(value, 1, root)]
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
                return json_too_deep(root, limit)
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


def form_body_problem(data, files=None) -> str | None:
    """What makes a parsed form unusable (a NUL character or a lone surrogate in a field's name
    or value, or in an uploaded file's field name or content type), as a message naming where,
    or None."""
    for name, values in data.lists():
        problem = _text_problem(name)
        if problem:
            return _key_problem("body", problem)
        where = f"body.{name}"[:200]
        for value in values:
            problem = _text_problem(value) if isinstance(value, str) else None
            if problem:
                return _value_problem(where, problem)
    for name, uploads in files.lists() if files is not None else ():
        problem = _text_problem(name)
        if problem:
            return _key_problem("body", problem)
        # Django keeps only printable characters of a file's name, but its content type as sent.
        for upload in uploads:
            problem = _text_problem(upload.content_type or "")
            if problem:
                return _value_problem(f"body.{name}.content_type"[:200], problem)
    return None


class BoundedFormParser(FormParser):
    """DRF's form parser refusing what form_body_problem names with the JSON parser's 400
    `parse_error`."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        problem = form_body_problem(data)
        if problem:
            raise ParseError(problem)
        return data


class BoundedMultiPartParser(MultiPartParser):
    """DRF's multipart parser refusing what form_body_problem names, in fields and in files,
    with the JSON parser's 400 `parse_error`."""

    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)
        problem = form_body_problem(parsed.data, parsed.files)
        if problem:
            # Refused uploads are not read again: their temporary files go now, not at
            # garbage collection.
            for _name, uploads in parsed.files.lists():
                for upload in uploads:
                    upload.close()
            raise ParseError(problem)
        return parsed
