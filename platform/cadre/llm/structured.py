"""A chat call that must answer with one JSON object (memory extraction, dedup, feedback)."""

from __future__ import annotations

import json
import re

from cadre.llm.base import ModelProvider, ProviderError

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def chat_json(provider: ModelProvider, system: str, user: str) -> dict:
    """Ask `provider` (at temperature 0, in JSON mode where the endpoint has one) and return the
    parsed object; ProviderError when the call fails or the answer is not a JSON object."""
    result = provider.chat(
        [{"role": "system", "content": system}, {"role": "user", "content": user}],
        temperature=0,
        response_format={"type": "json_object"},
    )
    text = (result.text or "").strip()
    if text.startswith("```"):
        text = _FENCE.sub("", text)
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ProviderError("model answer is not JSON") from error
    if not isinstance(value, dict):
        raise ProviderError("model answer is not a JSON object")
    return value
