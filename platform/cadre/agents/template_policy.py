"""A role template's policy chain: the governance chain its versions link to, which runs after
the organization's chain for every agent of the template."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from cadre.agents.models import AgentTemplate, TemplateVersion
from cadre.errors import InvalidInput
from cadre.governance.models import PolicyChain
from cadre.governance.policy.chain import ResolvedChain, resolve_chain
from cadre.governance.policy.services import policy_chain_create, policy_chain_set
from cadre.tenancy.actors import Actor


def template_policy_chain(template: AgentTemplate) -> PolicyChain | None:
    """The chain the template's newest linked version runs under (all its versions share it)."""
    version = (
        template.versions.filter(policy_chain__isnull=False)
        .select_related("policy_chain")
        .order_by("-number")
        .first()
    )
    return version.policy_chain if version is not None else None


def template_resolved_chain(organization, template: AgentTemplate | None) -> ResolvedChain:
    """What the template's agents run: the organization's chain, then the template's."""
    chain = template_policy_chain(template) if template is not None else None
    return resolve_chain(organization, chain.pk if chain is not None else None)


@transaction.atomic
def template_policy_chain_set(*, actor: Actor, template: AgentTemplate, plugins) -> PolicyChain:
    """Replace the plugin list of the template's chain; the first write creates the chain and
    links every version of the template to it."""
    if template.organization_id != actor.organization.pk:
        raise InvalidInput(_("unknown template"), details={"template": ["Unknown template."]})
    AgentTemplate.objects.select_for_update().filter(pk=template.pk).first()
    chain = template_policy_chain(template)
    if chain is not None:
        return policy_chain_set(actor=actor, plugins=plugins, chain=chain)
    if not template.versions.exists():
        raise InvalidInput(_("The template has no version to run the chain."))
    chain = policy_chain_create(actor=actor, plugins=plugins)
    # A queryset update: the link is not version content, so published versions take it too
    # (as every version of the template ran under the template's chain).
    TemplateVersion.objects.filter(template=template).update(policy_chain=chain)
    return chain
