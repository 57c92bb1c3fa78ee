"""Request body parsers: JSON with its nesting bounded (a 400, never a RecursionError)."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Deeper than any body Cadre takes (tool schemas, metadata): past it the code that walks a body
# (validation, masking, JSON columns) could exhaust the interpreter's recursion limit.
MAX_JSON_DEPTH = 64


def json_depth_exceeds(value, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` (parsed JSON) nests objects and arrays more than `limit` deep, walked
    without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with a nesting limit: `[` x 50,000 (which the json module meets with
    RecursionError) and anything deeper than MAX_JSON_DEPTH is a 400 `parse_error`."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("The JSON body is nested too deeply.") from None
        if json_depth_exceeds(data):
            raise ParseError(f"The JSON body nests deeper than {MAX_JSON_DEPTH} levels.")
        return data
