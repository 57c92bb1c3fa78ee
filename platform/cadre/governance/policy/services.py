"""Write paths of the policy chain: replace the plugin list of the organization's chain or of a
template chain, create a template chain.

A template chain only adds: it runs after the organization's chain, which always runs whole, so
no entry of it can remove or relax an organization plugin. An entry that reads as switching one
off (a disabled entry naming a plugin the organization runs) is refused, not stored."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.errors import InvalidInput
from cadre.governance import audit
from cadre.governance.models import PolicyChain
from cadre.governance.policy.base import get
from cadre.governance.policy.chain import resolve_chain

MAX_PLUGINS = 30


def validate_plugins(plugins) -> list[dict]:
    """Normalized [{"plugin", "enabled", "config"}]; InvalidInput naming the bad entry."""
    if not isinstance(plugins, list) or len(plugins) > MAX_PLUGINS:
        raise InvalidInput(
            _("plugins must be a list of at most %(limit)s entries") % {"limit": MAX_PLUGINS},
            details={"plugins": [_("Expected a list.")]},
        )
    clean = []
    for index, entry in enumerate(plugins):
        if not isinstance(entry, dict) or not isinstance(entry.get("plugin"), str):
            raise InvalidInput(
                _("plugins[%(index)s] must be an object with a 'plugin' name") % {"index": index},
                details={"plugins": {str(index): [_("Expected {'plugin': name, ...}.")]}},
            )
        plugin = get(entry["plugin"])
        if plugin is None:
            raise InvalidInput(
                _("plugins[%(index)s]: unknown plugin %(plugin)r")
                % {"index": index, "plugin": entry["plugin"]},
                details={
                    "plugins": {
                        str(index): [_("Unknown plugin %(plugin)r.") % {"plugin": entry["plugin"]}]
                    }
                },
            )
        config = entry.get("config") or {}
        enabled = entry.get("enabled", True)
        if not isinstance(enabled, bool) or not isinstance(config, dict):
            raise InvalidInput(
                _("plugins[%(index)s]: 'enabled' must be a boolean and 'config' an object")
                % {"index": index},
                details={"plugins": {str(index): [_("Bad 'enabled' or 'config'.")]}},
            )
        try:
            plugin.validate_config(config)
        except ValueError as error:
            raise InvalidInput(
                _("plugins[%(index)s] (%(plugin)s): %(error)s")
                % {"index": index, "plugin": plugin.name, "error": error},
                details={"plugins": {str(index): [str(error)]}},
            ) from None
        clean.append({"plugin": plugin.name, "enabled": enabled, "config": config})
    return clean


def refuse_weakening(organization, plugins: list[dict]) -> None:
    """InvalidInput (`policy_weakening`) when a template chain's entry disables a plugin the
    organization's chain (or the default one) runs."""
    enforced = {
        entry.get("plugin")
        for entry in resolve_chain(organization).plugins
        if entry.get("enabled", True)
    }
    for index, entry in enumerate(plugins):
        if not entry["enabled"] and entry["plugin"] in enforced:
            problem = (
                f"The organization's chain runs {entry['plugin']} for every agent; a template "
                "chain can only add plugins, not switch the organization's off."
            )
            raise InvalidInput(
                _("plugins[%(index)s]: %(problem)s") % {"index": index, "problem": problem},
                code="policy_weakening",
                details={"plugins": {str(index): [problem]}},
            )


@transaction.atomic
def policy_chain_set(*, actor, plugins, chain: PolicyChain | None = None) -> PolicyChain:
    """Replace the plugin list of the organization's chain (or of template chain `chain`);
    bumps its version. The organization's chain is created on its first write."""
    actor.require("policy.manage")
    if chain is not None and chain.organization_id != actor.organization.pk:
        raise InvalidInput(
            _("unknown policy chain"), details={"chain": [_("Unknown policy chain.")]}
        )
    clean = validate_plugins(plugins)
    chains = PolicyChain.objects.select_for_update().filter(organization=actor.organization)
    if chain is not None:
        chain = chains.get(pk=chain.pk)
        if chain.scope == PolicyChain.Scope.TEMPLATE:
            refuse_weakening(actor.organization, clean)
    else:
        chain = chains.filter(scope=PolicyChain.Scope.ORGANIZATION).first()
    before = {"plugins": chain.plugins, "version": chain.version} if chain else None
    if chain is None:
        chain = PolicyChain(
            organization=actor.organization, scope=PolicyChain.Scope.ORGANIZATION, version=0
        )
    return _chain_save(actor=actor, chain=chain, plugins=clean, before=before)


@transaction.atomic
def policy_chain_create(*, actor, plugins) -> PolicyChain:
    """A new template chain (version 1) for role template versions to link to."""
    actor.require("policy.manage")
    clean = validate_plugins(plugins)
    refuse_weakening(actor.organization, clean)
    chain = PolicyChain(
        organization=actor.organization, scope=PolicyChain.Scope.TEMPLATE, version=0
    )
    return _chain_save(actor=actor, chain=chain, plugins=clean, before=None)


def _chain_save(*, actor, chain: PolicyChain, plugins: list[dict], before) -> PolicyChain:
    chain.plugins = plugins
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
