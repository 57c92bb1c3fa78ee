"""Write paths of the policy chain: replace an organization's or a template's plugin list."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from cadre.errors import InvalidInput
from cadre.governance import audit
from cadre.governance.models import PolicyChain
from cadre.governance.policy.base import get

MAX_PLUGINS = 30


def validate_plugins(plugins) -> list[dict]:
    """Normalized [{"plugin", "enabled", "config"}]; InvalidInput naming the bad entry."""
    if not isinstance(plugins, list) or len(plugins) > MAX_PLUGINS:
        raise InvalidInput(
            f"plugins must be a list of at most {MAX_PLUGINS} entries",
            details={"plugins": ["Expected a list."]},
        )
    clean = []
    for index, entry in enumerate(plugins):
        if not isinstance(entry, dict) or not isinstance(entry.get("plugin"), str):
            raise InvalidInput(
                f"plugins[{index}] must be an object with a 'plugin' name",
                details={"plugins": {str(index): ["Expected {'plugin': name, ...}."]}},
            )
        plugin = get(entry["plugin"])
        if plugin is None:
            raise InvalidInput(
                f"plugins[{index}]: unknown plugin {entry['plugin']!r}",
                details={"plugins": {str(index): [f"Unknown plugin {entry['plugin']!r}."]}},
            )
        config = entry.get("config") or {}
        enabled = entry.get("enabled", True)
        if not isinstance(enabled, bool) or not isinstance(config, dict):
            raise InvalidInput(
                f"plugins[{index}]: 'enabled' must be a boolean and 'config' an object",
                details={"plugins": {str(index): ["Bad 'enabled' or 'config'."]}},
            )
        try:
            plugin.validate_config(config)
        except ValueError as error:
            raise InvalidInput(
                f"plugins[{index}] ({plugin.name}): {error}",
                details={"plugins": {str(index): [str(error)]}},
            ) from None
        clean.append({"plugin": plugin.name, "enabled": enabled, "config": config})
    return clean


@transaction.atomic
def policy_chain_set(*, actor, plugins, template=None) -> PolicyChain:
    """Replace the plugin list of the organization's chain (or `template`'s); bumps version."""
    actor.require("policy.manage")
    if template is not None and template.organization_id != actor.organization.pk:
        raise InvalidInput("unknown template", details={"template": ["Unknown template."]})
    clean = validate_plugins(plugins)
    scope = {"template_id": template.pk} if template is not None else {"template_id__isnull": True}
    chain = (
        PolicyChain.objects.select_for_update()
        .filter(organization=actor.organization, **scope)
        .order_by("pk")
        .first()
    )
    before = {"plugins": chain.plugins, "version": chain.version} if chain else None
    if chain is None:
        chain = PolicyChain(organization=actor.organization, template=template, version=0)
    chain.plugins = clean
    chain.version += 1
    chain.updated_by = actor.member
    chain.updated_at = timezone.now()
    chain.save()
    audit.record(
        actor=actor,
        action="policy.chain_update",
        target=chain,
        before=before,
        after={"plugins": chain.plugins, "version": chain.version},
    )
    return chain
