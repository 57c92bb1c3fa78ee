"""SCIM under the rules the rest of Cadre keeps: a token acts within its creator's limits
(owners are protected as on the members API), e-mails Cadre stores always serialize, a write
commits only with its answer, hostile input is a 4xx SCIM error that stores nothing, failed
tokens are throttled like API keys, and a provisioned user never reaches another organization's
account."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor, system_actor
from cadre.tenancy.models import Department, Member
from cadre.tenancy.scim import views as scim_views

ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"
PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"


class Scim:
    """A Django test client speaking SCIM with one bearer token."""

    def __init__(self, secret: str):
        self.client = Client(headers={"Authorization": f"Bearer {secret}"})

    # A client sends a path's non-ASCII characters percent-encoded in UTF-8.
    def get(self, path: str, **params):
        return self.client.get(f"/scim/v2/{quote(path)}", params)

    def send(self, method: str, path: str, body):
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        return getattr(self.client, method)(
            f"/scim/v2/{quote(path)}", data=data, content_type="application/scim+json"
        )

    def delete(self, path: str):
        return self.client.delete(f"/scim/v2/{quote(path)}")


def _deactivate(active: bool = False) -> dict:
    return {
        "schemas": [PATCH_SCHEMA],
        "Operations": [{"op": "replace", "path": "active", "value": active}],
    }


def _user_body(member: Member, active: bool) -> dict:
    return {
        "schemas": [USER_SCHEMA],
        "userName": member.user_name or member.email,
        "displayName": member.display_name,
        "emails": [{"value": member.email}],
        "active": active,
    }


def _assert_scim_error(answer, status: int) -> None:
    assert answer.status_code == status, answer.content
    assert answer.json()["schemas"] == [ERROR_SCHEMA]


def _token_of(member: Member) -> Scim:
    _, secret = services.scim_token_create(actor=member_actor(member), name="IdP")
    return Scim(secret)


@pytest.fixture
def it_admin(make_member):
    return make_member(roles=["it_admin"], display_name="Ivy", email="ivy@acme.example")


# --- finding 5: owners are protected on SCIM as on the members API ------------------------


def test_it_admin_token_cannot_deactivate_or_delete_an_owner(alice, it_admin, client_for):
    api = client_for(it_admin).post(f"/api/v1/members/{alice.pk}/deactivate/")
    assert api.status_code == 403  # the members API's rule, which SCIM mirrors
    scim = _token_of(it_admin)
    _assert_scim_error(scim.send("patch", f"Users/{alice.pk}", _deactivate()), 403)
    _assert_scim_error(scim.send("put", f"Users/{alice.pk}", _user_body(alice, False)), 403)
    _assert_scim_error(scim.delete(f"Users/{alice.pk}"), 403)
    alice.refresh_from_db()
    assert alice.status == Member.Status.ACTIVE and alice.scim_deleted_at is None
    assert not AuditEvent.objects.filter(action="member.deactivate").exists()


def test_it_admin_token_cannot_reactivate_or_hide_a_deactivated_owner(alice, it_admin, make_member):
    olga = make_member(roles=["owner"], email="olga@acme.example")
    services.member_deactivate(actor=member_actor(alice), member=olga)
    scim = _token_of(it_admin)
    _assert_scim_error(scim.send("patch", f"Users/{olga.pk}", _deactivate(active=True)), 403)
    _assert_scim_error(scim.delete(f"Users/{olga.pk}"), 403)
    olga.refresh_from_db()
    assert olga.status == Member.Status.DEACTIVATED and olga.scim_deleted_at is None
    assert not AuditEvent.objects.filter(action__in=["member.reactivate", "member.scim_delete"])


def test_it_admin_token_still_deprovisions_an_employee(it_admin, bob):
    answer = _token_of(it_admin).send("patch", f"Users/{bob.pk}", _deactivate())
    assert answer.status_code == 200 and answer.json()["active"] is False
    bob.refresh_from_db()
    assert bob.status == Member.Status.DEACTIVATED
    event = AuditEvent.objects.get(action="member.deactivate", target_id=str(bob.pk))
    assert event.actor_type == "scim_token" and "IdP" in event.actor_label


def test_a_token_without_a_creator_never_acts_as_an_owner(alice, make_member):
    _, secret = services.scim_token_create(actor=system_actor(alice.organization), name="CLI")
    _assert_scim_error(Scim(secret).send("patch", f"Users/{alice.pk}", _deactivate()), 403)
    alice.refresh_from_db()
    assert alice.is_active


def test_an_owners_token_deactivates_another_owner_but_not_the_last(alice, make_member):
    second = make_member(roles=["owner"], email="olga@acme.example")
    scim = _token_of(alice)
    assert scim.send("patch", f"Users/{second.pk}", _deactivate()).status_code == 200
    second.refresh_from_db()
    assert second.status == Member.Status.DEACTIVATED
    # alice is now the last owner: her own token may not deactivate her (members API: 409).
    _assert_scim_error(scim.send("patch", f"Users/{alice.pk}", _deactivate()), 409)
    alice.refresh_from_db()
    assert alice.is_active


def test_a_deactivated_creators_token_is_refused(alice, it_admin, bob):
    scim = _token_of(it_admin)
    services.member_deactivate(actor=member_actor(alice), member=it_admin)
    _assert_scim_error(scim.send("patch", f"Users/{bob.pk}", _deactivate()), 401)
    bob.refresh_from_db()
    assert bob.is_active


def test_a_token_loses_what_its_creator_loses(alice, it_admin, bob):
    scim = _token_of(it_admin)
    services.member_update(actor=member_actor(alice), member=it_admin, roles=["employee"])
    _assert_scim_error(scim.send("patch", f"Users/{bob.pk}", _deactivate()), 403)
    bob.refresh_from_db()
    assert bob.is_active


# --- finding 6: e-mails at special-use domains ---------------------------------------------


@pytest.fixture
def demo_admin(make_member):
    return make_member(roles=["employee"], email="admin@demo.local", display_name="Demo")


def test_listing_serializes_emails_at_special_use_domains(it_admin, demo_admin, bob):
    answer = _token_of(it_admin).get("Users")
    assert answer.status_code == 200
    emails = {r["emails"][0]["value"] for r in answer.json()["Resources"]}
    assert {"admin@demo.local", "bob@acme.test"} <= emails


def test_entra_patch_deprovisions_a_member_at_a_local_domain(it_admin, demo_admin):
    answer = _token_of(it_admin).send("patch", f"Users/{demo_admin.pk}", _deactivate())
    assert answer.status_code == 200 and answer.json()["emails"] == [{"value": "admin@demo.local"}]
    demo_admin.refresh_from_db()
    assert demo_admin.status == Member.Status.DEACTIVATED


def test_put_deprovisions_a_member_at_a_local_domain(it_admin, demo_admin):
    answer = _token_of(it_admin).send(
        "put", f"Users/{demo_admin.pk}", _user_body(demo_admin, False)
    )
    assert answer.status_code == 200 and answer.json()["active"] is False
    demo_admin.refresh_from_db()
    assert demo_admin.status == Member.Status.DEACTIVATED


def test_a_put_whose_answer_cannot_be_built_changes_nothing(it_admin, make_member, monkeypatch):
    dana = make_member(email="dana@acme.example", display_name="Dana")

    def broken(*args, **kwargs):
        raise scim_views.SCIMException(detail="The answer could not be built.")

    monkeypatch.setattr(scim_views, "_dump", broken)
    scim = _token_of(it_admin)
    _assert_scim_error(scim.send("put", f"Users/{dana.pk}", _user_body(dana, False)), 400)
    _assert_scim_error(scim.send("patch", f"Users/{dana.pk}", _deactivate()), 400)
    dana.refresh_from_db()
    assert dana.status == Member.Status.ACTIVE
    assert not AuditEvent.objects.filter(action="member.deactivate").exists()


def test_input_emails_are_still_validated(it_admin, org_a):
    before = Member.objects.count()
    body = {"schemas": [USER_SCHEMA], "userName": "eve", "emails": [{"value": "not an email"}]}
    _assert_scim_error(_token_of(it_admin).send("post", "Users", body), 400)
    assert Member.objects.count() == before


def test_a_new_user_at_a_local_domain_is_accepted_as_cadre_accepts_it(it_admin):
    body = {"schemas": [USER_SCHEMA], "userName": "eve@lab.local"}
    answer = _token_of(it_admin).send("post", "Users", body)
    assert answer.status_code == 201
    assert answer.json()["emails"] == [{"value": "eve@lab.local"}]


# --- finding 10: hostile input is a 4xx SCIM error that stores nothing ----------------------

NUL = "a\x00b"
DEEP = "[" * 50_000 + "]" * 50_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000


def _counts():
    return (
        Member.objects.count(),
        Department.objects.count(),
        AuditEvent.objects.count(),
        Member.objects.filter(status=Member.Status.DEACTIVATED).count(),
    )


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("Users/²", {}),
        ("Groups/²", {}),
        ("Users/99999999999999999999999", {}),
        ("Groups/¹²", {}),
        ("Users", {"filter": 'id eq "²"'}),
        ("Users", {"filter": 'id eq "99999999999999999999999"'}),
        ("Groups", {"filter": 'members eq "²"'}),
        ("Groups", {"filter": 'members.value eq "١٢"'}),
        ("Users", {"filter": f'userName eq "{NUL}"'}),
        ("Users", {"filter": f'externalId co "{NUL}"'}),
        ("Users", {"startIndex": "99999999999999999999999"}),
        ("Users", {"startIndex": "9" * 5000}),
        ("Users", {"count": "99999999999999999999999"}),
        ("Users", {"startIndex": "²"}),
        ("Groups", {"startIndex": "1e309"}),
        ("Users", {"attributes": NUL}),
    ],
)
def test_hostile_reads_are_never_5xx(it_admin, bob, path, params):
    answer = _token_of(it_admin).get(path, **params)
    assert answer.status_code < 500, answer.content
    if answer.status_code >= 400:
        assert answer.json()["schemas"] == [ERROR_SCHEMA]
    else:
        assert answer.json()["totalResults"] == 0 or "startIndex" in params or "count" in params


def _user(user_name, **extra) -> dict:
    return {"schemas": [USER_SCHEMA], "userName": user_name, **extra}


def _group(name, **extra) -> dict:
    return {"schemas": [GROUP_SCHEMA], "displayName": name, **extra}


HOSTILE_WRITES = [
    ("post", "Users", _user(NUL)),
    ("post", "Users", _user("x" * 300)),
    ("post", "Users", _user("ok", displayName=NUL)),
    ("post", "Users", _user("ok", emails=[{"value": "a" * 300 + "@acme.example"}])),
    ("post", "Users", _user("ok", externalId="\ud800")),
    ("post", "Users", _user("ok", title=1e309)),
    ("post", "Users", _user(["wrong", "type"])),
    ("post", "Users", DEEP),
    ("post", "Users", DEEP_OBJECT),
    ("post", "Users", '{"userName": "\\ud800"}'),
    ("post", "Users", '{"userName": "ok", "title": 1e309}'),
    ("post", "Users", b"\xff\xfe"),
    ("post", "Groups", _group(NUL)),
    ("post", "Groups", _group("Sales", members=[{"value": "²"}])),
    ("post", "Groups", _group("Sales", members=[{"value": "99999999999999999999999"}])),
    ("post", "Groups", _group("Sales", externalId=NUL)),
    ("post", "Groups", DEEP),
    ("post", "Users/.search", {"filter": f'userName eq "{NUL}"'}),
    ("post", "Users/.search", {"startIndex": "²", "count": 1e309}),
    ("post", "Users/.search", {"startIndex": 1e309}),
    ("post", "Users/.search", {"count": True}),
    ("post", "Users/.search", DEEP),
]


@pytest.mark.parametrize(("method", "path", "body"), HOSTILE_WRITES)
def test_hostile_writes_are_4xx_and_store_nothing(it_admin, bob, method, path, body):
    scim = _token_of(it_admin)
    before = _counts()
    answer = scim.send(method, path, body)
    assert 400 <= answer.status_code < 500, answer.content
    assert answer.json()["schemas"] == [ERROR_SCHEMA]
    assert _counts() == before


@pytest.mark.parametrize(
    "body",
    [
        {"startIndex": 10**30, "count": 10**30},
        {"filter": 'members eq "²"'},
        {"filter": 'id eq "١٢"'},
        {"filter": 'id ne "99999999999999999999999"', "count": 0},
    ],
)
def test_searches_past_every_id_answer_an_empty_page(it_admin, bob, body):
    path = "Groups/.search" if "members" in body.get("filter", "") else "Users/.search"
    answer = _token_of(it_admin).send("post", path, body)
    assert answer.status_code == 200, answer.content
    assert answer.json()["Resources"] == [] if "Resources" in answer.json() else True


def test_hostile_changes_to_an_existing_user_and_group_store_nothing(it_admin, bob):
    scim = _token_of(it_admin)
    group = scim.send("post", "Groups", _group("Sales", members=[{"value": str(bob.pk)}]))
    assert group.status_code == 201
    group_id = group.json()["id"]
    before = _counts()
    bob_before = Member.objects.filter(pk=bob.pk).values().get()
    hostile = [
        ("put", f"Users/{bob.pk}", _user(NUL)),
        ("put", f"Users/{bob.pk}", _user("x" * 300)),
        ("put", f"Users/{bob.pk}", DEEP),
        ("patch", f"Users/{bob.pk}", {**_deactivate(), "Operations": "nope"}),
        (
            "patch",
            f"Users/{bob.pk}",
            {
                "schemas": [PATCH_SCHEMA],
                "Operations": [{"op": "replace", "path": "userName", "value": NUL}],
            },
        ),
        (
            "patch",
            f"Users/{bob.pk}",
            {
                "schemas": [PATCH_SCHEMA],
                "Operations": [{"op": "replace", "path": "userName", "value": "x" * 300}],
            },
        ),
        ("patch", "Users/²", _deactivate()),
        ("put", f"Groups/{group_id}", _group(NUL)),
        ("put", f"Groups/{group_id}", _group("Sales", members=[{"value": "²"}])),
        (
            "patch",
            f"Groups/{group_id}",
            {
                "schemas": [PATCH_SCHEMA],
                "Operations": [{"op": "add", "path": "members", "value": [{"value": "²"}]}],
            },
        ),
        ("patch", "Groups/²", _deactivate()),
    ]
    for method, path, body in hostile:
        answer = scim.send(method, path, body)
        assert 400 <= answer.status_code < 500, (method, path, answer.content)
        assert answer.json()["schemas"] == [ERROR_SCHEMA]
    # Removing a member no id names is a no-op (RFC 7644 §3.5.2.2), not an error.
    remove = {
        "schemas": [PATCH_SCHEMA],
        "Operations": [{"op": "remove", "path": 'members[value eq "²"]'}],
    }
    assert scim.send("patch", f"Groups/{group_id}", remove).status_code == 200
    assert _counts() == before
    assert Member.objects.filter(pk=bob.pk).values().get() == bob_before


# --- finding 11: failed tokens are throttled like API keys ----------------------------------


def test_wrong_tokens_are_throttled_like_api_keys(it_admin, bob, settings):
    settings.CADRE_API_THROTTLE_RATES = {**settings.CADRE_API_THROTTLE_RATES}
    settings.CADRE_API_THROTTLE_RATES["auth_failure"] = "30/5m"
    good = _token_of(it_admin)
    statuses = [
        Scim(f"scim_0000000{i % 10}_wrong{i}").send("patch", f"Users/{bob.pk}", _deactivate())
        for i in range(40)
    ]
    assert [s.status_code for s in statuses] == [401] * 30 + [429] * 10
    blocked = statuses[-1]
    assert blocked.json()["schemas"] == [ERROR_SCHEMA] and int(blocked["Retry-After"]) >= 1
    # A right guess made during the block is refused the same way, so it cannot tell itself apart.
    answer = good.send("patch", f"Users/{bob.pk}", _deactivate())
    _assert_scim_error(answer, 429)
    bob.refresh_from_db()
    assert bob.is_active


def test_scim_and_api_key_failures_share_one_budget(it_admin, bob, settings):
    settings.CADRE_API_THROTTLE_RATES = {
        **settings.CADRE_API_THROTTLE_RATES,
        "auth_failure": "5/5m",
    }
    api = Client(headers={"Authorization": "Bearer cadre_00000000_wrong"})
    assert [api.get("/api/v1/organization/").status_code for _ in range(3)] == [401] * 3
    wrong = Scim("scim_00000000_wrong")
    assert [wrong.get("Users").status_code for _ in range(3)] == [401, 401, 429]


# --- identities never cross organizations -------------------------------------------------


def test_a_provisioned_user_never_links_to_another_organizations_account(alice, charlie):
    """Organization B's identity provider provisions alice's e-mail: B gets a member of its
    own with no login; alice's account gains nothing in B."""
    scim = _token_of(charlie)
    body = _user(alice.email, emails=[{"value": alice.email}], active=True)
    answer = scim.send("post", "Users", body)
    assert answer.status_code == 201
    created = Member.objects.get(pk=answer.json()["id"])
    assert created.organization_id == charlie.organization_id and created.user_id is None
    patch = {
        "schemas": [PATCH_SCHEMA],
        "Operations": [{"op": "replace", "path": "displayName", "value": "Alice (B)"}],
    }
    assert scim.send("patch", f"Users/{created.pk}", patch).status_code == 200
    created.refresh_from_db()
    assert created.user_id is None
    assert list(alice.user.memberships.values_list("organization_id", flat=True)) == [
        alice.organization_id
    ]


# --- hostile input on every SCIM operation (property-based) -------------------------------

HOSTILE_TEXT = st.one_of(
    st.sampled_from(
        [
            "²",
            "١٢",
            "¹²",
            "a\x00b",
            "\ud800",
            "x" * 300,
            "",
            " ",
            "0",
            "-1",
            "99999999999999999999999",
        ]
    ),
    st.text(max_size=40),
)
# A URL carries UTF-8: a lone surrogate cannot be sent in one (it arrives replaced).
QUERY_TEXT = HOSTILE_TEXT.filter(lambda text: text.encode("utf-8", "ignore").decode() == text)
USER_KEYS = st.sampled_from(
    [
        "userName",
        "displayName",
        "emails",
        "name",
        "title",
        "active",
        "externalId",
        "phoneNumbers",
        "schemas",
        "id",
        "members",
        "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User",
    ]
)
HOSTILE_VALUE = st.recursive(
    st.one_of(
        HOSTILE_TEXT,
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False),
        st.just(1e309),
        st.booleans(),
        st.none(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(HOSTILE_TEXT | USER_KEYS, inner, max_size=3)
    ),
    max_leaves=8,
)
PATHS = st.one_of(
    st.sampled_from(
        [
            "active",
            "userName",
            "emails",
            'emails[value eq "²"].value',
            "name.givenName",
            "members",
            'members[value eq "²"]',
            "displayName",
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department",
        ]
    ),
    HOSTILE_TEXT,
)
OPERATIONS = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "replace", "remove", "Replace"]) | HOSTILE_TEXT},
    optional={"path": PATHS, "value": HOSTILE_VALUE},
)


def _fuzz_body(attributes: dict, schema: str) -> dict:
    return {"schemas": [schema], **attributes}


@pytest.fixture
def fuzz_scim(it_admin, bob):
    services.department_create(actor=member_actor(it_admin), name="Fuzzed")
    return _token_of(it_admin)


@hypothesis_settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_hostile_input_on_every_scim_operation_is_never_5xx(fuzz_scim, bob, data):
    scim = fuzz_scim
    kind = data.draw(
        st.sampled_from(
            ["post_user", "patch_user", "put_user", "post_group", "patch_group", "list", "search"]
        )
    )
    attributes = data.draw(st.dictionaries(USER_KEYS, HOSTILE_VALUE, max_size=4))
    before = _counts()
    if kind == "post_user":
        answer = scim.send("post", "Users", _fuzz_body(attributes, USER_SCHEMA))
    elif kind == "put_user":
        answer = scim.send("put", f"Users/{bob.pk}", _fuzz_body(attributes, USER_SCHEMA))
    elif kind == "post_group":
        answer = scim.send("post", "Groups", _fuzz_body(attributes, GROUP_SCHEMA))
    elif kind in ("patch_user", "patch_group"):
        operations = data.draw(st.lists(OPERATIONS, min_size=1, max_size=3))
        group = Department.objects.filter(organization=bob.organization, is_archived=False).first()
        target = f"Users/{bob.pk}" if kind == "patch_user" else f"Groups/{group.pk}"
        answer = scim.send("patch", target, {"schemas": [PATCH_SCHEMA], "Operations": operations})
    else:
        params = data.draw(
            st.dictionaries(
                st.sampled_from(
                    ["filter", "startIndex", "count", "attributes", "excludedAttributes"]
                ),
                QUERY_TEXT,
                max_size=3,
            )
        )
        if kind == "list":
            answer = scim.get(data.draw(st.sampled_from(["Users", "Groups"])), **params)
        else:
            answer = scim.send("post", "Users/.search", params)
    assert answer.status_code < 500, (kind, answer.content)
    if answer.status_code >= 400:
        assert answer.json()["schemas"] == [ERROR_SCHEMA], answer.content
        assert _counts() == before
