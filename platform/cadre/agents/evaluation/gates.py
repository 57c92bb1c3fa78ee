"""Evaluation gates: an organization may require a passing replay of a change before it takes
effect (`organization.settings["evaluation_gates"]`):

- `template_publish`: publishing a template version needs a passing replay of that version;
- `template_model_change`: publishing a version whose model (provider, provider configuration,
  model) differs from the published one needs a passing replay of that model change — a
  `model` candidate with those settings, or the version itself;
- `embedding_activate`: switching search to an embedding model needs a passing retrieval-suite
  replay with that model as the candidate.

A provider change that would change the model of published templates (its model or base URL,
or which provider is the organization's default) cannot be replayed before it is made, so
while `template_model_change` is on it is refused (409 `model_change_gated`), naming the
templates it would change.

A failing or missing replay blocks the change (409 `evaluation_gate`) unless the actor
overrides it with a reason, which is audited with who overrode it, the gate and the replay it
overrode."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from cadre.agents.evaluation.models import EvalCase, EvalRun, EvalSuite
from cadre.agents.models import TemplateVersion
from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import Actor

TEMPLATE_PUBLISH = "template_publish"
TEMPLATE_MODEL_CHANGE = "template_model_change"
EMBEDDING_ACTIVATE = "embedding_activate"
GATES = (TEMPLATE_PUBLISH, TEMPLATE_MODEL_CHANGE, EMBEDDING_ACTIVATE)
# The model settings that name the model a template calls; the rest (budget, context) do not.
MODEL_KEYS = ("provider", "provider_config", "model")
# How many recent candidate replays are looked through for the one that matches a change.
RECENT_REPLAYS = 200


def gates_of(organization) -> dict:
    configured = (organization.settings or {}).get("evaluation_gates") or {}
    return {gate: bool(configured.get(gate)) for gate in GATES}


@transaction.atomic
def evaluation_gates_set(*, actor: Actor, gates: dict) -> dict:
    """Turn gates on or off for the actor's organization (`organization.manage`)."""
    actor.require("organization.manage")
    unknown = sorted(set(gates) - set(GATES))
    if unknown:
        raise InvalidInput(
            _("Unknown gates: %(value)s.") % {"value": ', '.join(unknown)}, code="unknown_gate",
            details={key: ["Not a gate."] for key in unknown},
        )  # fmt: skip
    organization = (
        type(actor.organization).objects.select_for_update().get(pk=actor.organization.pk)
    )
    before = gates_of(organization)
    organization.settings = {
        **(organization.settings or {}),
        "evaluation_gates": {**before, **{k: bool(v) for k, v in gates.items()}},
    }
    organization.save(update_fields=["settings"])
    after = gates_of(organization)
    audit.record(
        actor=actor, action="evaluation.gates.update", target=organization, before=before,
        after=after,
    )  # fmt: skip
    return after


def _finished(organization_id: int):
    return EvalRun.objects.filter(
        organization_id=organization_id, status=EvalRun.Status.COMPLETED
    ).order_by("-finished_at", "-pk")


def _passes_or_override(
    *, actor: Actor, gate: str, target, replay: EvalRun | None, override_reason: str, what: str
) -> EvalRun | None:
    """The replay when it passed; else Conflict `evaluation_gate`, unless `override_reason`
    says why to go ahead: then the override is audited (who, gate, replay, verdict, reason)."""
    if replay is not None and replay.verdict == EvalRun.Verdict.PASS:
        return replay
    why = (
        _("no finished replay of %(what)s") % {"what": what}
        if replay is None
        else _("its replay regressed")
    )
    reason = (override_reason or "").strip()[:500]
    if not reason:
        raise Conflict(
            _("This change needs a passing evaluation suite (%(gate)s): %(why)s.")
            % {"gate": gate, "why": why},
            code="evaluation_gate",
            details={"gate": gate, "replay": replay.pk if replay else None},
        )
    audit.record(
        actor=actor,
        action="evaluation.gate.override",
        target=target,
        after={
            "gate": gate,
            "replay": replay.pk if replay else None,
            "verdict": replay.verdict if replay else None,
            "reason": reason,
        },
        reason=reason,
    )
    return replay


# --- publishing a template version ------------------------------------------------------------


def latest_replay(version) -> EvalRun | None:
    """The newest finished replay with `version` as its candidate."""
    return (
        _finished(version.organization_id)
        .filter(candidate__kind="template_version", candidate__version=version.pk)
        .first()
    )


def check_publish(*, actor: Actor, version, override_reason: str = "") -> EvalRun | None:
    """Raise Conflict `evaluation_gate` when the gate is on and the version's newest replay is
    missing or regressed, unless `override_reason` is given: then the override is audited."""
    if not gates_of(version.organization)[TEMPLATE_PUBLISH]:
        return None
    return _passes_or_override(
        actor=actor,
        gate=TEMPLATE_PUBLISH,
        target=version,
        replay=latest_replay(version),
        override_reason=override_reason,
        what=_("this version"),
    )


# --- changing a template's model --------------------------------------------------------------


def model_identity(model_settings: dict | None) -> dict:
    """The keys of model settings that say which model is called (absent provider: offline)."""
    settings = dict(model_settings or {})
    identity = {key: settings.get(key) or None for key in MODEL_KEYS}
    identity["provider"] = identity["provider"] or "offline"
    if identity["provider_config"] is not None:
        identity["provider_config"] = str(identity["provider_config"])
    return identity


def published_before(version):
    """The template's published version that `version` would replace (None: its first)."""
    return (
        TemplateVersion.objects.filter(
            template_id=version.template_id, status=TemplateVersion.Status.PUBLISHED
        )
        .exclude(pk=version.pk)
        .order_by("-number")
        .first()
    )


def latest_model_replay(version, current) -> EvalRun | None:
    """The newest finished replay, of a suite of the version's template, whose candidate is the
    version's model change: a `model` candidate whose settings over the published version's
    name the version's model, or the version itself."""
    wanted = model_identity(version.model_settings)
    base = dict(current.model_settings or {}) if current is not None else {}
    replays = (
        _finished(version.organization_id)
        .filter(
            suite__template_id=version.template_id,
            candidate__kind__in=["model", "template_version"],
        )
        .only("pk", "candidate", "verdict")[:RECENT_REPLAYS]
    )
    for replay in replays:
        candidate = replay.candidate or {}
        if candidate.get("kind") == "template_version":
            if candidate.get("version") == version.pk:
                return replay
        elif model_identity({**base, **(candidate.get("model_settings") or {})}) == wanted:
            return replay
    return None


def check_model_change(*, actor: Actor, version, override_reason: str = "") -> EvalRun | None:
    """When the gate is on and publishing `version` changes the template's model, raise
    Conflict `evaluation_gate` unless the newest replay of that change passed or
    `override_reason` is given (audited). A template's first version changes nothing."""
    if not gates_of(version.organization)[TEMPLATE_MODEL_CHANGE]:
        return None
    current = published_before(version)
    if current is None:
        return None
    if model_identity(current.model_settings) == model_identity(version.model_settings):
        return None
    return _passes_or_override(
        actor=actor,
        gate=TEMPLATE_MODEL_CHANGE,
        target=version,
        replay=latest_model_replay(version, current),
        override_reason=override_reason,
        what=_("this model change"),
    )


def check_provider_change(*, organization, templates, change: str) -> None:
    """With `template_model_change` on, refuse a provider change (`change` says which) that
    would move the published `templates` to another model: no replay can be run of an endpoint
    before it exists, so the way through is a new provider, a replay naming it and a published
    version per template — each passing this gate — or turning the gate off first."""
    if not templates:
        return
    # as stored now: the actor's copy may predate a change of the gates
    organization = type(organization).objects.only("settings").get(pk=organization.pk)
    if not gates_of(organization)[TEMPLATE_MODEL_CHANGE]:
        return
    names = ", ".join(f"“{template.name}”" for template in templates)
    raise Conflict(
        _(
            "%(change)s would change the model of %(names)s without a replay, and "
            "the organization's model-change evaluation gate is on. Add a provider "
            "with the new setting, replay each template's suite with it as the "
            "candidate model, and publish a version that names it; or turn the "
            "gate off on the Evaluation page first."
        )
        % {"change": change, "names": names},
        code="model_change_gated",
        details={
            "gate": TEMPLATE_MODEL_CHANGE,
            "templates": [{"id": template.pk, "name": template.name} for template in templates],
        },
    )


# --- activating an embedding model ------------------------------------------------------------


def latest_embedding_replay(organization_id: int, model_id: str) -> EvalRun | None:
    """The organization's newest finished retrieval-suite replay with `model_id` as the
    candidate embedding model."""
    return (
        _finished(organization_id)
        .filter(
            suite__kind=EvalSuite.Kind.RETRIEVAL,
            candidate__kind="embedding",
            candidate__embedding_model=model_id,
        )
        .first()
    )


def embedding_activation_held(organization) -> bool:
    """Whether switching the organization's search to a new model waits for a person: with the
    gate on, always; with it off, when the organization's retrieval suite has cases — the
    re-embed then shows recall@k under both models and offers the switch (never refused).
    With neither, a completed re-embed switches on its own."""
    if gates_of(organization)[EMBEDDING_ACTIVATE]:
        return True
    return EvalCase.objects.filter(
        suite__organization=organization, suite__kind=EvalSuite.Kind.RETRIEVAL
    ).exists()


def check_embedding_activation(*, actor: Actor, model, override_reason: str = "") -> None:
    """Registered into `cadre.memory.activation` (evaluation's AppConfig.ready): when the
    actor's organization has the gate on, activating `model` needs a passing retrieval-suite
    replay with it as the candidate, or an audited override."""
    organization = (
        type(actor.organization).objects.only("settings").get(pk=actor.organization.pk)
    )  # as stored now: the actor's copy may predate a change of the gates
    if not gates_of(organization)[EMBEDDING_ACTIVATE]:
        return
    _passes_or_override(
        actor=actor,
        gate=EMBEDDING_ACTIVATE,
        target=("embedding_model", model.pk, str(model)),
        replay=latest_embedding_replay(actor.organization.pk, model.pk),
        override_reason=override_reason,
        what=_("a retrieval suite with this embedding model"),
    )
