"""A model-judged rubric for replay reply checks: when a suite names a judge (`EvalSuite.judge`:
`{"provider_config"?, "provider"?, "model"?, "rubric"}`), each side's reply is sent to that
model through the provider adapters with the rubric, the case's input and reference reply,
asking for a JSON verdict `{"pass": bool, "score": 0..1, "reasons": str}`. The verdict is
stored on the side's outcome (`judge`) and counts in its pass; a judge that cannot be reached
or answers anything else is recorded as `{"error": "judge_error", "detail"}` and leaves the
pass to the rule checks — it never fails the replay."""

from __future__ import annotations

import json
import logging
import re

from django.utils.translation import gettext as _

from cadre.agents import providers
from cadre.agents.models import ModelProviderConfig
from cadre.errors import InvalidInput
from cadre.llm import BudgetExceeded, provider_for

logger = logging.getLogger(__name__)

JUDGE_ERROR = "judge_error"
MAX_RUBRIC = 4000
SYSTEM = (
    "You judge an AI assistant's reply against a rubric. Answer with one JSON object and "
    'nothing else: {"pass": true or false, "score": a number from 0 to 1, '
    '"reasons": "why, in one or two sentences"}.'
)


def clean_judge(organization_id: int, value) -> dict:
    """A suite's judge setting, checked ({} = no judge)."""
    if not value:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(_("judge must be an object."), details={"judge": ["An object."]})
    rubric = str(value.get("rubric") or "").strip()
    if not rubric or len(rubric) > MAX_RUBRIC:
        raise InvalidInput(
            _("A judge needs a rubric."), details={"judge": [f"rubric: 1..{MAX_RUBRIC} characters"]}
        )
    judge: dict = {"rubric": rubric}
    if value.get("provider_config") is not None:
        try:
            config_id = int(value["provider_config"])
        except (TypeError, ValueError):
            config_id = 0
        if not ModelProviderConfig.objects.filter(
            pk=config_id, organization_id=organization_id, is_active=True
        ).exists():
            raise InvalidInput(
                _("No such model provider."), details={"judge": ["provider_config: unknown"]}
            )
        judge["provider_config"] = config_id
    for name in ("provider", "model"):
        if value.get(name):
            judge[name] = str(value[name])[:200]
    if "provider_config" not in judge and "provider" not in judge:
        raise InvalidInput(
            _("A judge names a provider configuration or a provider."),
            details={"judge": ["provider_config or provider"]},
        )
    return judge


def judge_provider(suite):
    """The judge's provider for `suite`, or None when it has no judge."""
    if not suite.judge:
        return None

    settings = {k: v for k, v in suite.judge.items() if k != "rubric"}
    config, settings = providers.resolve(settings, suite.organization_id)
    return provider_for(settings, config)


def _verdict(text: str) -> dict:
    match = re.search(r"\{.*\}", text or "", re.DOTALL)
    if not match:
        raise ValueError("no JSON object in the judge's answer")
    data = json.loads(match.group(0))
    if not isinstance(data, dict) or not isinstance(data.get("pass"), bool):
        raise ValueError('the verdict needs "pass": true or false')
    score = data.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise ValueError('the verdict needs "score" between 0 and 1')
    reasons = data.get("reasons", "")
    if isinstance(reasons, list):
        reasons = "; ".join(str(r) for r in reasons)
    return {"pass": data["pass"], "score": round(float(score), 4), "reasons": str(reasons)[:2000]}


def judge_reply(provider, rubric: str, case, reply: str) -> dict:
    """The judge's verdict on one reply, or a judge_error (raises only BudgetExceeded)."""
    expectations = case.expectations or {}
    prompt = {
        "rubric": rubric,
        "input": case.input_text,
        "reference_reply": expectations.get("reference_reply", ""),
        "reply": reply or "",
    }
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": json.dumps(prompt, ensure_ascii=False)},
    ]
    try:
        result = provider.chat(messages, [])
        return _verdict(result.text)
    except BudgetExceeded:
        raise  # a refused call stops the replay (see services.eval_run_execute)
    except Exception as error:  # a judge's failure is recorded, never the replay's
        logger.info("evaluation judge failed for case %s: %s", case.pk, error)
        return {"error": JUDGE_ERROR, "detail": f"{type(error).__name__}: {error}"[:500]}


def apply(outcome: dict, verdict: dict) -> dict:
    """The outcome with the judge's verdict stored and counted in its pass."""
    outcome["judge"] = verdict
    outcome["checks"]["judge"] = verdict
    if "error" not in verdict:
        outcome["passed"] = bool(outcome["passed"] and verdict["pass"])
        outcome["checks"]["passed"] = outcome["passed"]
    return outcome
