"""What good looks like, checked by rule on one side's outcome: required and forbidden facts in
the reply, expected tool calls, the expected policy outcome, expected memories, and the
reply's word overlap with the reference reply (reported, not judged)."""

from __future__ import annotations

import re

from cadre.governance.masking.policy import PLACEHOLDER

_WORD = re.compile(r"\w+", re.UNICODE)


def unmasked_shape(value):
    """`value` with placeholder numbers dropped (`<PHONE_2>` → `<PHONE>`): two sides that mask
    the same kind of value compare equal whichever number their vault gave it."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda match: f"<{match.group(1)}>", value)
    if isinstance(value, dict):
        return {key: unmasked_shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unmasked_shape(item) for item in value]
    return value


def _contains(text: str, fact: str) -> bool:
    return unmasked_shape(fact).casefold() in unmasked_shape(text).casefold()


def _arguments_match(expected: dict, actual: dict) -> bool:
    """Every expected argument present with the same value (modulo masking); others free."""
    actual = unmasked_shape(actual or {})
    return all(actual.get(key) == unmasked_shape(value) for key, value in expected.items())


def word_f1(reply: str, reference: str) -> float:
    got = [w.casefold() for w in _WORD.findall(unmasked_shape(reply))]
    want = [w.casefold() for w in _WORD.findall(unmasked_shape(reference))]
    if not got or not want:
        return 0.0
    common = 0
    pool = list(want)
    for word in got:
        if word in pool:
            pool.remove(word)
            common += 1
    if not common:
        return 0.0
    precision, recall = common / len(got), common / len(want)
    return round(2 * precision * recall / (precision + recall), 4)


def reply_checks(outcome: dict, expectations: dict) -> dict:
    """The rule checks of one outcome; `passed` is every specified check passing (a case with
    no expectations passes when the side replied)."""
    reply = outcome.get("reply") or ""
    checks: dict = {}
    required = [f for f in expectations.get("required_facts") or [] if isinstance(f, str)]
    forbidden = [f for f in expectations.get("forbidden_facts") or [] if isinstance(f, str)]
    if required:
        checks["missing_facts"] = [f for f in required if not _contains(reply, f)]
    if forbidden:
        checks["forbidden_present"] = [f for f in forbidden if _contains(reply, f)]
    expected_calls = [
        c for c in expectations.get("expected_tool_calls") or [] if isinstance(c, dict)
    ]
    if "expected_tool_calls" in expectations:
        made = list(outcome.get("tool_calls") or [])
        missing = []
        for call in expected_calls:
            found = next(
                (
                    m
                    for m in made
                    if m["name"] == call.get("name")
                    and _arguments_match(call.get("arguments") or {}, m.get("arguments"))
                ),
                None,
            )
            if found is None:
                missing.append(call)
            else:
                made.remove(found)
        checks["missing_tool_calls"] = missing
        if not expected_calls:  # "no tool call" expected
            checks["unexpected_tool_calls"] = [m["name"] for m in made]
    if expectations.get("expected_policy"):
        got = (outcome.get("policy") or {}).get("input", "allow")
        checks["policy_matches"] = got == expectations["expected_policy"]
    if expectations.get("expected_memories"):
        want = {m for m in expectations["expected_memories"] if isinstance(m, int)}
        sent = {m["id"] for m in outcome.get("memories") or []}
        checks["memory_recall"] = round(len(want & sent) / len(want), 4) if want else 1.0
    if expectations.get("reference_reply"):
        checks["reference_f1"] = word_f1(reply, expectations["reference_reply"])
    passed = (
        not checks.get("missing_facts")
        and not checks.get("forbidden_present")
        and not checks.get("missing_tool_calls")
        and not checks.get("unexpected_tool_calls")
        and checks.get("policy_matches", True)
        and checks.get("memory_recall", 1.0) >= float(expectations.get("min_memory_recall", 1.0))
        and not outcome.get("error", "").startswith("model:")
    )
    if not expectations and not reply:
        passed = False
    checks["passed"] = bool(passed)
    return checks
