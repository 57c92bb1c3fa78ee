"""The authorization matrix (tests/authorization/matrix.py) against the URLconf and the server.

1. Every route of the whole URLconf has a declaration, and every declaration names a route: a
   new route fails here until its author says who may call it.
2. Every declared (route, method) is sent once as every principal — anonymous, an employee and
   their API key, the subject of the personal data, a skill reviewer, an auditor, a business
   admin, an IT admin, the owner, another organization's owner and their key, and a SCIM token —
   and answers as its rule implies:
     allowed    not 401/403/404 and no redirect to the sign-in page (a 400 for the empty body
                every write here sends means authorization passed);
     denied     401, 403, 404 or a redirect to the sign-in page;
     not found  exactly 404: another organization's object, another member's personal data;
     refused    (signed routes, sent unsigned) any 4xx;
     open       (public routes) anything but a 5xx: who asks must not matter.
   Each request runs in a savepoint that is rolled back, so none changes what the next sees.

Cells that answer otherwise today are listed in tests/authorization/deviations.py, grouped by
bug: the sweep checks each still answers otherwise (a fixed cell fails it until its entry is
removed), and each group is a strict xfail test asserting the declared outcomes.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.apps import apps
from django.db import connection, transaction
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse
from rest_framework.test import APIClient

from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from cadre.tenancy.roles import (
    PERMISSIONS,
    SCOPES,
    permissions_for_roles,
    permissions_for_scopes,
)
from tests.api.tenant_objects import FACTORIES, ROUTE_KWARGS, agents_world
from tests.authorization.deviations import KNOWN_DEVIATIONS
from tests.authorization.matrix import OUTSIDE_URLCONF, Declaration, declarations
from tests.factories import MemberFactory

DISPATCHABLE = ("GET", "POST", "PUT", "PATCH", "DELETE")
_counter = itertools.count(1)


# --- the URLconf -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    key: str  # the URL name (namespaced), else the route
    route: str
    name: str | None
    callback: object
    kwargs: tuple[str, ...]

    @property
    def view_class(self):
        return getattr(self.callback, "cls", None) or getattr(self.callback, "view_class", None)

    @property
    def surface(self) -> str:
        if self.route.startswith(("mem0/", "memos/")):
            return "compat"
        if self.route.startswith("scim/"):
            return "scim"
        if self.route.startswith("api/"):
            return "api"
        return "console"

    def dispatched_methods(self) -> set[str] | None:
        """What a class-based view dispatches; None for a function view (its row decides)."""
        view_class = self.view_class
        if view_class is None:
            return None
        allowed = {m.upper() for m in getattr(view_class, "http_method_names", ())}
        actions = getattr(self.callback, "actions", None)
        if actions:
            # DRF adds HEAD to a viewset's actions on its first request
            return {method.upper() for method in actions} & allowed & set(DISPATCHABLE)
        return {m for m in DISPATCHABLE if hasattr(view_class, m.lower()) and m in allowed}

    @property
    def model(self):
        view_class = self.view_class
        model = getattr(view_class, "model", None)
        if model is None:
            model = getattr(getattr(view_class, "queryset", None), "model", None)
        return model


def _walk(patterns, prefix: str = "", namespace: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = namespace
            if pattern.namespace:
                inner = f"{namespace}{pattern.namespace}:"
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern, namespace


def all_routes() -> dict[str, Route]:
    routes: dict[str, Route] = {}
    for route, pattern, namespace in _walk(get_resolver().url_patterns):
        key = f"{namespace}{pattern.name}" if pattern.name else route
        kwargs = tuple(pattern.pattern.regex.groupindex)
        routes.setdefault(key, Route(key, route, pattern.name, pattern.callback, kwargs))
    return routes


ROUTES = all_routes()
DECLARATIONS = declarations()


def test_every_route_in_the_urlconf_is_declared():
    declared = {declaration.route for declaration in DECLARATIONS}
    missing = sorted(set(ROUTES) - declared)
    assert not missing, "declare these routes in tests/authorization/matrix.py: " + ", ".join(
        missing
    )


def test_every_declaration_names_a_route():
    unknown = sorted({d.route for d in DECLARATIONS} - set(ROUTES))
    assert not unknown, f"declared but not in the URLconf: {unknown}"


def test_declared_methods_are_the_ones_a_view_dispatches():
    wrong = {}
    by_route: dict[str, set[str]] = {}
    for declaration in DECLARATIONS:
        by_route.setdefault(declaration.route, set()).add(declaration.method)
    for key, methods in by_route.items():
        dispatched = ROUTES[key].dispatched_methods()
        if dispatched is not None and methods != dispatched:
            wrong[key] = {"declared": sorted(methods), "dispatched": sorted(dispatched)}
    assert not wrong, wrong


def test_routes_outside_the_urlconf_are_declared():
    """Websocket routes and the MCP mount are served in front of Django: each is listed."""
    from cadre.mcp_server import server
    from cadre.routing import websocket_urlpatterns

    websockets = {str(pattern.pattern) for pattern in websocket_urlpatterns}
    assert websockets <= set(OUTSIDE_URLCONF), sorted(websockets - set(OUTSIDE_URLCONF))
    assert '"/mcp/"' in inspect.getsource(server.with_mcp) and "/mcp/" in OUTSIDE_URLCONF


def test_declared_permissions_exist():
    unknown = {d.id: p for d in DECLARATIONS for p in d.permissions if p not in PERMISSIONS}
    assert not unknown, unknown


def test_a_declaration_is_made_once():
    seen = [(d.route, d.method, d.object) for d in DECLARATIONS]
    assert len(seen) == len(set(seen)), sorted(k for k in seen if seen.count(k) > 1)


# --- principals --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    name: str
    credential: str  # none | session | key | scim
    roles: tuple[str, ...] = ()
    outsider: bool = False
    subject: bool = False

    @property
    def permissions(self) -> frozenset[str]:
        granted = permissions_for_roles(self.roles)
        if self.credential == "key":
            granted &= permissions_for_scopes(SCOPES)
        return granted


PRINCIPALS = {
    p.name: p
    for p in [
        Principal("anonymous", "none"),
        Principal("employee", "session", ("employee",)),
        Principal("employee_key", "key", ("employee",)),
        Principal("subject", "session", ("employee",), subject=True),
        Principal("reviewer", "session", ("skill_reviewer",)),
        Principal("auditor", "session", ("auditor",)),
        Principal("business_admin", "session", ("business_admin",)),
        Principal("it_admin", "session", ("it_admin",)),
        Principal("owner", "session", ("owner",)),
        Principal("outsider_owner", "session", ("owner",), outsider=True),
        Principal("outsider_key", "key", ("owner",), outsider=True),
        Principal("scim_token", "scim"),
    ]
}

SURFACE_CREDENTIALS = {
    "console": {"session"},
    "api": {"session", "key"},
    "compat": {"key"},
    "scim": {"scim"},
}


def expected(declaration: Declaration, principal: Principal) -> str:
    """allowed | denied | not_found | refused | open: what the rule says for the principal."""
    rule = declaration.rule
    if rule == "public":
        return "open"
    if rule == "signed":
        return "refused"
    if rule == "nobody":
        return "denied"
    route = ROUTES[declaration.route]
    if principal.credential not in SURFACE_CREDENTIALS[route.surface]:
        return "denied"
    if principal.outsider and declaration.object != "-":
        return "not_found"  # another organization's object: 404, never 403
    if rule in ("member", "scim", "compat:read", "compat:write"):
        return "allowed"  # the keys here carry every scope
    if rule == "perm":
        granted = principal.permissions
        return "allowed" if any(p in granted for p in declaration.permissions) else "denied"
    if rule == "personal" and declaration.permissions:
        granted = principal.permissions
        if "memory.personal" in granted and any(p in granted for p in declaration.permissions):
            return "allowed"
        return "denied" if principal.subject else "not_found"
    if rule == "personal":
        return (
            "allowed"
            if principal.subject or "memory.personal" in principal.permissions
            else "not_found"
        )
    if rule == "subject":
        return "allowed" if principal.subject else "not_found"
    if rule == "own":
        granted = principal.permissions
        if principal.subject or any(p in granted for p in declaration.permissions):
            return "allowed"
        return "denied"
    raise AssertionError(f"unknown rule {rule}")


def outcome(response) -> str:
    status = response.status_code
    if status == 501:
        return "allowed"  # an operation the protocol lets a server leave out (SCIM)
    if status >= 500:
        return f"error {status}"
    if status == 401:
        return "unauthenticated"
    if status == 403:
        return "denied"
    if status == 404:
        return "not_found"
    if status == 405:
        return "method_not_allowed"
    if status == 429:
        return "throttled"
    if status in (301, 302, 303, 307) and response.get("Location", "").startswith(
        reverse("console:login")
    ):
        return "login_redirect"
    if 400 <= status < 500:
        return f"refused {status}"  # a client error after authorization: allowed
    return "allowed"


# Routes whose allowed answer to this matrix's request is 404 by their own logic: the object it
# builds has no such thing yet, or the empty request names nothing. Their denials are still
# checked; an allowed principal's 404 is not told apart from a refusal.
NOT_FOUND_WHEN_ALLOWED: dict[str, str] = {
    "memory-deletion": "the memory has no deletion record until it is deleted",
    "clawhub-resolve": "the empty query names no skill",
    "clawhub-download": "the empty query names no skill",
    "clawhub-file": "the empty query names no file",
    "clawhub-tag": "the empty body names no version to tag",
    "console:switch_organization": "the empty form names no organization",
    "mem0-feedback": "the empty body names no memory",
    "mem0-profile-job": "no profile job exists: Cadre starts none (profiles are refused, 501)",
    "mem0-project": "a Mem0 project is the calling key, which one URL for every key cannot name",
    "mem0-project-members": "a Mem0 project is the calling key, which one URL cannot name",
    "mem0-webhooks": "a Mem0 project is the calling key, which one URL cannot name",
    "mem0-webhook": "no webhook exists: creating one is refused (501)",
    "memos-update": "the empty body names no memory",
}


def agrees(expectation: str, got: str, route_key: str = "") -> bool:
    if expectation == "open":
        # a credential this surface does not take may still be refused (401)
        return not got.startswith("error") and got != "throttled"
    if expectation == "refused":
        refusals = ("unauthenticated", "denied", "not_found", "login_redirect")
        return got in refusals or got.startswith("refused")
    if expectation == "denied":
        return got in ("unauthenticated", "denied", "not_found", "login_redirect")
    if expectation == "allowed":
        if got == "not_found" and route_key in NOT_FOUND_WHEN_ALLOWED:
            return True
        return got == "allowed" or got.startswith("refused")
    return expectation == got


# --- the objects routes name -------------------------------------------------------------------


@dataclass
class World:
    """Organization A with one member per role and `dave`, whose personal data the personal
    routes name; charlie owns organization B. Objects are made on first use and kept: every
    request is rolled back, so none outlives the request that changed it."""

    org: object
    owner: object
    subject: object
    cache: dict = field(default_factory=dict)

    def once(self, key, make: Callable[[], object]):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def model(self, model):
        return self.once(model, lambda: FACTORIES[model](self.owner))

    @property
    def agents(self) -> dict:
        return self.once("agents", lambda: agents_world(self.owner, member=self.subject))

    def model_suite(self):
        from cadre.agents.evaluation.models import EvalSuite

        return self.model(EvalSuite)

    def personal_memory(self):
        from cadre.memory.models import Memory

        def make():
            content = "Dave's locker code is 4417."
            return Memory.objects.create(
                organization=self.org,
                scope="user",
                scope_key=f"user:{self.subject.pk}",
                content=content,
                search_text=content,
                content_hash=hashlib.sha256(content.encode()).hexdigest(),
            )

        return self.once("personal_memory", make)


def _auto(world: World, route: Route) -> dict:
    if route.name in ROUTE_KWARGS:
        make = ROUTE_KWARGS[route.name]  # one skill (or install) serves all its routes
        values = world.once(make, lambda: make(world.owner))
        return {name: values[name] for name in route.kwargs}
    model = route.model
    assert model in FACTORIES, f"no factory for {route.key} (model {model})"
    obj = world.model(model)
    return {name: obj.pk for name in route.kwargs}


def _personal_context_record(world: World):
    from cadre.memory.models import ContextRecord, ContextRecordItem

    run = world.agents["run"]
    record = ContextRecord.objects.create(
        organization=world.org,
        run_id=str(run.pk),
        actor_type="member",
        actor_id=str(world.subject.pk),
        query="locker code",
    )
    ContextRecordItem.objects.create(
        context=record, memory=world.personal_memory(), memory_version=1, rank=1, score=1.0
    )
    return record


def _turn_case(world: World):
    from cadre.agents.evaluation.models import EvalCase

    run = world.agents["run"]
    suite = world.model_suite()
    return EvalCase.objects.create(
        organization=world.org,
        suite=suite,
        input_text="hello",
        conversation=[{"role": "user", "content": "hello"}],
        member=world.subject,
        source=EvalCase.Source.TURN,
        source_run=run,
    )


def _subject_proposal(world: World):
    from cadre.skills.models import SkillProposal

    run = world.agents["run"]
    name = f"matrix-proposal-{next(_counter)}"
    return SkillProposal.objects.create(
        organization=world.org,
        member=world.subject,
        run=run,
        session=run.session,
        kind=SkillProposal.Kind.NEW_SKILL,
        name=name,
        correction="Also include the budget.",
        files={"SKILL.md": f"---\nname: {name}\ndescription: matrix\n---\n\nBody\n"},
        drafted_by="matrix",
    )


def _subject_confirmation(world: World):
    from datetime import timedelta

    from django.utils import timezone

    from cadre.governance.models import Confirmation

    run = world.agents["run"]
    return Confirmation.objects.create(
        organization=world.org,
        idempotency_key=f"matrix:{next(_counter)}",
        requester=world.subject,
        tool="im_send",
        summary="matrix",
        risk_level="high",
        decider_ids=[world.subject.pk],
        expires_at=timezone.now() + timedelta(hours=1),
        run_id=run.pk,
    )


def _idp(world: World):
    from cadre.tenancy.models import IdentityProvider

    return IdentityProvider.objects.create(
        organization=world.org,
        name="Feishu",
        slug="feishu",
        kind=IdentityProvider.Kind.FEISHU,
        client_id="cli_matrix",
        client_secret="matrix-secret",
        authorize_base_url="https://accounts.example.test",
        api_base_url="https://open.example.test",
    )


def _invited(world: World):
    from cadre.tenancy import services

    member, invitation, token = services.member_invite(
        actor=member_actor(world.owner), email=f"invited{next(_counter)}@acme.test"
    )
    return member, invitation, token


def _member_identity(world: World) -> dict:
    from tests.factories import IMIdentityFactory

    member = MemberFactory(organization=world.org)
    identity = IMIdentityFactory(member=member)
    return {"pk": member.pk, "identity_pk": identity.pk}


def _pk(label: str) -> Callable[[World], dict]:
    """The pk of the world's object of model `label` ("app_label.Model")."""
    return lambda w: {"pk": w.model(apps.get_model(label)).pk}


def _connector_child(label: str, kwarg: str) -> Callable[[World], dict]:
    def make(w: World) -> dict:
        obj = w.model(apps.get_model(label))
        return {"pk": obj.connector_id, kwarg: obj.pk}

    return make


def _hub_package(w: World) -> dict:
    make = ROUTE_KWARGS["hub-skill"]
    values = w.once(make, lambda: make(w.owner))
    return {
        "namespace": values["namespace"],
        "name": values["name"],
        "version": values["version"],
        "file_path": "SKILL.md",
    }


def _scim_group(w: World) -> dict:
    from tests.factories import DepartmentFactory

    return {"pk": w.once("scim_group", lambda: DepartmentFactory(organization=w.org)).pk}


def _scim_token_object(w: World) -> dict:
    from cadre.tenancy import services

    token, _ = w.once(
        "scim_token_object",
        lambda: services.scim_token_create(actor=member_actor(w.owner), name="revocable"),
    )
    return {"pk": token.pk}


OBJECTS: dict[str, Callable[[World], dict]] = {
    "unknown_path": lambda w: {"rest": "no/such/endpoint/"},
    "trigger_inbound": lambda w: {"trigger_id": w.agents["trigger"].pk},
    "personal_memory": lambda w: {"pk": w.personal_memory().pk},
    "personal_context": lambda w: {"pk": w.once("context", lambda: _personal_context_record(w)).pk},
    "subject_agent": lambda w: {"pk": w.agents["agent"].pk},
    "subject_session": lambda w: {"pk": w.agents["session"].pk},
    "subject_run": lambda w: {"pk": w.agents["run"].pk, "run_id": w.agents["run"].pk},
    "subject_session_run": lambda w: {"pk": w.agents["session"].pk, "run_pk": w.agents["run"].pk},
    "subject_proposal": lambda w: {"pk": w.once("proposal", lambda: _subject_proposal(w)).pk},
    "subject_session_confirmation": lambda w: {
        "pk": w.agents["session"].pk,
        "confirmation_pk": w.once("confirmation", lambda: _subject_confirmation(w)).pk,
    },
    "turn_case": lambda w: {"pk": w.once("turn_case", lambda: _turn_case(w)).pk},
    "connector_inbound": lambda w: {
        "platform": "webhook",
        "public_id": w.model(apps.get_model("connectors.Connector")).public_id,
    },
    "shared_memory_id": lambda w: {"memory_id": w.model(apps.get_model("memory.Memory")).pk},
    "personal_memory_id": lambda w: {"memory_id": w.personal_memory().pk},
    "mem0_user_entity": lambda w: {"entity_type": "user", "entity_id": w.subject.email},
    "mem0_profile_job": lambda w: {"job_id": "job-1"},
    "mem0_organization": lambda w: {"org_id": w.org.slug},
    "mem0_project": lambda w: {"org_id": w.org.slug, "project_id": "key-matrix"},
    "mem0_hook_project": lambda w: {"project_id": "key-matrix"},
    "mem0_webhook": lambda w: {"webhook_id": "1"},
    "scim_resource_type": lambda w: {"name": "User"},
    "scim_schema": lambda w: {"urn": "urn:ietf:params:scim:schemas:core:2.0:User"},
    "scim_user": lambda w: {"pk": w.model(apps.get_model("tenancy.Member")).pk},
    "scim_group": _scim_group,
    "scim_unknown": lambda w: {"rest": "Nothing"},
    "invitation_token": lambda w: {"token": w.once("invited", lambda: _invited(w))[2]},
    "invited_member": lambda w: {"pk": w.once("invited", lambda: _invited(w))[0].pk},
    "idp": lambda w: {
        "pk": w.once("idp", lambda: _idp(w)).pk,
        "org_slug": w.org.slug,
        "provider_slug": w.once("idp", lambda: _idp(w)).slug,
    },
    "saml_idp": lambda w: {
        "org_slug": w.org.slug,
        "provider_slug": w.once("idp", lambda: _idp(w)).slug,
    },
    "member": _pk("tenancy.Member"),
    "member_identity": lambda w: w.once("member_identity", lambda: _member_identity(w)),
    "department": _pk("tenancy.Department"),
    "position": _pk("tenancy.Position"),
    "audit_event": _pk("governance.AuditEvent"),
    "budget": _pk("governance.Budget"),
    "api_key": _pk("tenancy.ApiKey"),
    "scim_token": _scim_token_object,
    "memory": _pk("memory.Memory"),
    "template": lambda w: {"pk": w.agents["template"].pk},
    "template_version": lambda w: {
        "pk": w.agents["version"].template_id,
        "number": w.agents["version"].number,
    },
    "template_version_action": lambda w: {
        "pk": w.agents["version"].template_id,
        "number": w.agents["version"].number,
        "action": "submit",
    },
    "deployment": lambda w: {"pk": w.agents["deployment"].pk},
    "deployment_rollout": lambda w: {
        "pk": w.agents["rollout"].deployment_id,
        "rollout_pk": w.agents["rollout"].pk,
    },
    "eval_suite": lambda w: {"pk": w.model_suite().pk},
    "eval_run": _pk("evaluation.EvalRun"),
    "masking_rule": _pk("governance.MaskingRule"),
    "confirmation": lambda w: {"pk": w.once("confirmation", lambda: _subject_confirmation(w)).pk},
    "alert": _pk("governance.Alert"),
    "alert_rule": _pk("governance.AlertRule"),
    "audit_export": _pk("governance.AuditExport"),
    "connector": _pk("connectors.Connector"),
    "connector_conflict": _connector_child("connectors.DirectoryConflict", "conflict_pk"),
    "connector_binding": _connector_child("connectors.ConnectorBinding", "binding_pk"),
    "connector_unmapped": _connector_child("connectors.UnmappedIdentity", "unmapped_pk"),
    "hub_install": lambda w: {
        "pk": w.once(ROUTE_KWARGS["hub-install"], lambda: ROUTE_KWARGS["hub-install"](w.owner))[
            "pk"
        ]
    },
    "hub_package": _hub_package,
    "provider": _pk("agents.ModelProviderConfig"),
    "mcp_server": _pk("agents.McpServer"),
    "skill_candidate": _pk("skills.SkillCandidate"),
}


def url_for(declaration: Declaration, world: World) -> str:
    route = ROUTES[declaration.route]
    if declaration.object == "-":
        assert not route.kwargs, f"{route.key} needs an object"
        return reverse(route.key) if route.name else "/" + route.route
    if declaration.object == "auto":
        kwargs = _auto(world, route)
    else:
        kwargs = OBJECTS[declaration.object](world)
    assert set(route.kwargs) <= set(kwargs), (declaration.id, route.kwargs, kwargs)
    kwargs = {name: kwargs[name] for name in route.kwargs}
    if route.name:
        return reverse(route.key, kwargs=kwargs)
    path = "/" + route.route
    for name, value in kwargs.items():
        path = path.replace(f"<str:{name}>", str(value))
    path = path.replace("^(?P<rest>.*)$", str(kwargs.get("rest", "")))
    path = path.replace("<path:rest>", str(kwargs.get("rest", "")))
    assert resolve(path).url_name == route.name, path
    return path


def test_every_named_object_has_a_builder():
    named = {d.object for d in DECLARATIONS} - {"-", "auto"}
    assert named <= set(OBJECTS), sorted(named - set(OBJECTS))


# --- the sweep ----------------------------------------------------------------------------------


@pytest.fixture
def world(org_a, alice):
    subject = MemberFactory(
        organization=org_a, display_name="Dave", email="dave@acme.test", roles=["employee"]
    )
    return World(org=org_a, owner=alice, subject=subject)


@pytest.fixture
def unthrottled(settings):
    settings.CADRE_API_THROTTLE_RATES = {
        name: "1000000/minute" for name in settings.CADRE_API_THROTTLE_RATES
    }


def _api_key_client(member, *, forged: bool) -> APIClient:
    """A key with every scope: made through the service for an owner; for an employee (who may
    not mint such a key) stored directly, as a key whose creator was demoted would be."""
    from cadre.tenancy import services
    from cadre.tenancy.models import ApiKey

    if forged:
        prefix = f"{next(_counter):08x}"[-8:]
        secret = f"cadre_{prefix}_" + "m" * 40
        ApiKey.objects.create(
            organization=member.organization,
            name="matrix",
            prefix=prefix,
            key_hash=services.api_key_hash(secret),
            scopes=sorted(SCOPES),
            created_by=member,
        )
    else:
        _, secret = services.api_key_create(
            actor=member_actor(member), name="matrix", scopes=sorted(SCOPES)
        )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def client_for_principal(principal: Principal, world: World, charlie) -> APIClient:
    from cadre.tenancy import services

    if principal.credential == "none":
        return APIClient()
    if principal.credential == "scim":
        _, secret = services.scim_token_create(actor=member_actor(world.owner), name="matrix")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        return client
    if principal.outsider:
        member = charlie
    elif principal.subject:
        member = world.subject
    elif principal.roles == ("owner",):
        member = world.owner
    else:
        member = MemberFactory(organization=world.org, roles=list(principal.roles))
    if principal.credential == "key":
        return _api_key_client(member, forged=not principal.outsider)
    client = APIClient()
    client.force_login(member.user)
    return client


def send(client: APIClient, declaration: Declaration, url: str):
    """One request inside a savepoint that is rolled back; cookies as they were before it (a
    sign-out must not sign the next request out)."""
    route = ROUTES[declaration.route]
    cookies = copy.deepcopy(client.cookies)
    method = declaration.method.lower()
    with transaction.atomic():
        if method == "get":
            response = client.get(url)
        elif route.surface == "console":
            response = client.post(url, {}, format="multipart")
        else:
            response = getattr(client, method)(url, {}, format="json")
        transaction.set_rollback(True)
    assert connection.connection is not None and not connection.connection.closed, (
        f"{declaration.id} closed the database connection"
    )
    # A streamed response (a run's events) is left unread and unclosed: closing it sends
    # request_finished, whose close_old_connections would close the test's connection.
    client.cookies = cookies
    return response


DEVIATING = {cell: name for name, dev in KNOWN_DEVIATIONS.items() for cell in dev.pairs()}


def _check_cell(client, principal: Principal, declaration: Declaration, url: str):
    """(agrees, description) for one cell."""
    response = send(client, declaration, url)
    expectation = expected(declaration, principal)
    got = outcome(response)
    ok = agrees(expectation, got, declaration.route)
    return ok, f"{declaration.id}: expected {expectation}, got {got} ({response.status_code} {url})"


@pytest.mark.usefixtures("unthrottled")
@pytest.mark.parametrize("principal_name", list(PRINCIPALS))
def test_every_route_answers_each_principal_as_declared(principal_name, world, charlie):
    principal = PRINCIPALS[principal_name]
    client = client_for_principal(principal, world, charlie)
    client.raise_request_exception = False
    # Every object is made before the first request, so the audit log counts only requests.
    urls = {declaration: url_for(declaration, world) for declaration in DECLARATIONS}
    audited = AuditEvent.objects.count()
    wrong, fixed = [], []
    for declaration in DECLARATIONS:
        ok, described = _check_cell(client, principal, declaration, urls[declaration])
        deviation = DEVIATING.get((principal_name, declaration.id))
        if deviation is not None and ok:
            fixed.append(f"{described} (listed in KNOWN_DEVIATIONS[{deviation!r}])")
        elif deviation is None and not ok:
            wrong.append(described)
    assert not wrong, f"{len(wrong)} cells answer {principal_name} otherwise:\n" + "\n".join(wrong)
    assert not fixed, "fixed: remove these cells from KNOWN_DEVIATIONS:\n" + "\n".join(fixed)
    assert AuditEvent.objects.count() == audited, "a request's writes outlived its savepoint"


@pytest.mark.usefixtures("unthrottled")
@pytest.mark.parametrize(
    "deviation_name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=dev.reason))
        for name, dev in KNOWN_DEVIATIONS.items()
    ],
)
def test_known_deviation_answers_as_declared(deviation_name, world, charlie):
    """Fails while any cell of the deviation answers otherwise (xfail); passes when all do."""
    deviation = KNOWN_DEVIATIONS[deviation_name]
    by_id = {d.id: d for d in DECLARATIONS}
    wrong = []
    for principal_name, declaration_ids in deviation.cells.items():
        principal = PRINCIPALS[principal_name]
        client = client_for_principal(principal, world, charlie)
        client.raise_request_exception = False
        for declaration_id in declaration_ids:
            declaration = by_id[declaration_id]
            url = url_for(declaration, world)
            ok, described = _check_cell(client, principal, declaration, url)
            if not ok:
                wrong.append(f"{principal_name} {described}")
    assert not wrong, "\n".join(wrong)


def test_known_deviations_name_declared_cells():
    ids = {d.id for d in DECLARATIONS}
    for name, deviation in KNOWN_DEVIATIONS.items():
        assert set(deviation.cells) <= set(PRINCIPALS), name
        named = {d for _, d in deviation.pairs()}
        assert named <= ids, (name, named - ids)
