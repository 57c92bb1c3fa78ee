"""Masking write paths (organization rules) and the entry points other apps call to mask."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.governance.masking.engine import MaskResult, get_engine
from cadre.governance.masking.policy import MaskingPolicy
from cadre.governance.masking.rules import validate_rule
from cadre.governance.masking.vault import ConversationVault, EphemeralVault
from cadre.governance.models import MaskingRule

MAX_PREVIEW_CHARS = 20_000
PREVIEW_PERMISSIONS = ("policy.manage", "audit.view")


def masking_preview(*, actor, text: str, policy: MaskingPolicy | None = None) -> MaskResult:
    """What masking would do to `text` for the actor's organization. Stores nothing:
    pseudonyms come from an in-memory vault that is dropped afterwards."""
    if not any(actor.has(permission) for permission in PREVIEW_PERMISSIONS):
        raise NotPermitted(_("You need the 'policy.manage' or 'audit.view' permission."))
    if len(text) > MAX_PREVIEW_CHARS:
        raise InvalidInput(
            _("text is longer than %(limit)s characters") % {"limit": MAX_PREVIEW_CHARS},
            details={"text": [_("At most %(limit)s characters.") % {"limit": MAX_PREVIEW_CHARS}]},
        )
    return get_engine().mask(
        text, policy=policy, conversation=EphemeralVault(), organization=actor.organization
    )


def mask_for_conversation(
    *, organization, conversation_key: str, text: str, policy: MaskingPolicy | None = None
) -> MaskResult:
    """Mask text bound for a model, memory, logs or exports; pseudonyms are stored (encrypted)
    in the conversation's vault so the reply can be re-identified for the employee."""
    vault = ConversationVault(organization, conversation_key)
    return get_engine().mask(text, policy=policy, conversation=vault, organization=organization)


def _rule_snapshot(rule: MaskingRule) -> dict:
    return {
        "name": rule.name,
        "entity_type": rule.entity_type,
        "kind": rule.kind,
        "pattern": rule.pattern,
        "term_count": len(rule.term_list),  # the terms themselves are confidential
        "is_active": rule.is_active,
    }


def _clean_terms(terms: Iterable[str] | None) -> list[str]:
    return [str(term).strip() for term in (terms or []) if str(term).strip()]


@transaction.atomic
def masking_rule_create(
    *,
    actor,
    name: str,
    entity_type: str,
    kind: str,
    pattern: str = "",
    terms: Iterable[str] | None = None,
    is_active: bool = True,
) -> MaskingRule:
    actor.require("policy.manage")
    terms = _clean_terms(terms)
    validate_rule(entity_type=entity_type, kind=kind, pattern=pattern, terms=terms)
    if MaskingRule.objects.filter(organization=actor.organization, name=name).exists():
        raise Conflict(_("A masking rule named %(name)r already exists.") % {"name": name})
    rule = MaskingRule.objects.create(
        organization=actor.organization,
        name=name,
        entity_type=entity_type,
        kind=kind,
        pattern=pattern if kind == MaskingRule.Kind.PATTERN else "",
        terms="\n".join(terms) if kind == MaskingRule.Kind.DICTIONARY else "",
        is_active=is_active,
    )
    audit.record(actor=actor, action="masking_rule.create", target=rule, after=_rule_snapshot(rule))
    return rule


@transaction.atomic
def masking_rule_update(*, actor, rule: MaskingRule, **changes) -> MaskingRule:
    actor.require("policy.manage", rule)
    rule = MaskingRule.objects.select_for_update().get(pk=rule.pk)
    before = _rule_snapshot(rule)
    if "terms" in changes:
        changes["terms"] = "\n".join(_clean_terms(changes["terms"]))
    for field in ("name", "entity_type", "kind", "pattern", "terms", "is_active"):
        if field in changes:
            setattr(rule, field, changes[field])
    validate_rule(
        entity_type=rule.entity_type, kind=rule.kind, pattern=rule.pattern, terms=rule.term_list
    )
    if (
        MaskingRule.objects.filter(organization=rule.organization, name=rule.name)
        .exclude(pk=rule.pk)
        .exists()
    ):
        raise Conflict(_("A masking rule named %(rule)r already exists.") % {"rule": rule.name})
    rule.updated_at = timezone.now()
    rule.save()
    audit.record(
        actor=actor,
        action="masking_rule.update",
        target=rule,
        before=before,
        after=_rule_snapshot(rule),
    )
    return rule


@transaction.atomic
def masking_rule_delete(*, actor, rule: MaskingRule) -> None:
    actor.require("policy.manage", rule)
    audit.record(
        actor=actor, action="masking_rule.delete", target=rule, before=_rule_snapshot(rule)
    )
    rule.delete()
