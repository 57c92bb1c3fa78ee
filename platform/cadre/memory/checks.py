"""`cadre doctor`'s memory checks: the configured embedding model works here, and which
organizations still search with another one (an upgrade's earlier default) until an admin
re-embeds them."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Count
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from cadre.checks import FAIL, OK, WARN, Check
from cadre.memory import embeddings
from cadre.memory.models import OrganizationEmbeddingModel


def doctor_checks() -> list[Check]:
    try:
        config = embeddings.configured()
    except ImproperlyConfigured as error:
        return [
            Check(FAIL, "embeddings", str(error), _("fix CADRE_EMBEDDING_* in the environment"))
        ]
    checks = [_configured_model(config)]
    others = (
        OrganizationEmbeddingModel.objects.filter(status=OrganizationEmbeddingModel.Status.ACTIVE)
        .exclude(model_id=config.model_id)
        .values_list("model_id")
        .annotate(count=Count("pk"))
        .order_by("model_id")
    )
    for model_id, count in others:
        checks.append(
            Check(
                WARN,
                "embeddings",
                ngettext(
                    "%(count)d organization still searches memory with %(model)s, not the "
                    "configured %(configured)s",
                    "%(count)d organizations still search memory with %(model)s, not the "
                    "configured %(configured)s",
                    count,
                )
                % {"count": count, "model": model_id, "configured": config.model_id},
                _("an admin of each re-embeds it: Models page, Re-embed memories"),
            )
        )
    return checks


def _configured_model(config: embeddings.EmbeddingConfig) -> Check:
    if config.provider != "local":  # an endpoint: not called from doctor
        return Check(OK, "embeddings", _("%(model)s (an endpoint)") % {"model": config.model_id})
    try:
        vector = embeddings.LocalProvider(config.name).embed(["doctor"])[0]
    except (ImproperlyConfigured, OSError, RuntimeError) as error:
        return Check(FAIL, "embeddings", str(error), _("reinstall: make install"))
    return Check(
        OK,
        "embeddings",
        _("%(model)s embeds on this machine (%(dimension)d dimensions)")
        % {"model": config.model_id, "dimension": len(vector)},
    )
