"""Testing a model endpoint: one tiny request, its status, its latency, the models offered, or
the error — never what the endpoint wrote (the reply's text, an error page): a test must not
turn Cadre into a reader of whatever the URL points at."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from cadre.llm.base import ModelProvider, ProviderError
from cadre.llm.reasons import MODEL_NOT_FOUND

PROBE_MESSAGES = [{"role": "user", "content": "Reply with the single word: ok"}]
PROBE_MAX_TOKENS = 16
MAX_MODELS = 500
MAX_MODEL_NAME = 200


@dataclass(frozen=True)
class ConnectionReport:
    ok: bool
    model: str
    latency_ms: int | None = None
    status: int | None = None  # the HTTP status of the chat request, when one came back
    models: list[str] | None = None  # None: the endpoint has no model list
    error: str = ""
    reason: str = ""
    warning: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def connection_test(provider: ModelProvider) -> ConnectionReport:
    """Send one short chat request (no retries: the report says what the first try met), then
    ask for the model list where the API has one."""
    started = time.monotonic()
    try:
        provider.complete(PROBE_MESSAGES, [], max_tokens=PROBE_MAX_TOKENS)
    except ProviderError as error:
        return ConnectionReport(
            ok=False,
            model=provider.model,
            status=error.status,
            error=error.summary,
            reason=error.reason,
        )
    latency = round((time.monotonic() - started) * 1000)
    try:
        models = provider.list_models()
    except ProviderError:
        models = None  # the chat answered: a failing list is not the endpoint failing
    if models is not None:
        # Model names, not a channel for whatever else the endpoint has to say.
        models = [name[:MAX_MODEL_NAME] for name in models[:MAX_MODELS]]
    warning = ""
    if models is not None and provider.model not in models:
        warning = (
            f"{MODEL_NOT_FOUND.replace('_', ' ')}: {provider.model!r} is not among the "
            f"{len(models)} models the endpoint lists"
        )
    return ConnectionReport(
        ok=True,
        model=provider.model,
        latency_ms=latency,
        status=200,
        models=models,
        warning=warning,
    )
