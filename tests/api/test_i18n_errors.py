"""API errors speak the caller's language (issue 33): the same bad request answered with
`Accept-Language: zh-CN` keeps its status and code and says it in Chinese; without the header,
English; an API key of a member whose language is Simplified Chinese gets Chinese without it.
Codes never change."""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings as django_settings
from django.test import override_settings
from django.utils import translation
from rest_framework.test import APIClient

from tests.factories import DepartmentFactory

CJK = re.compile(r"[\u4e00-\u9fff]")
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
PAST_KEY = {"name": "k", "scopes": ["org:read"], "expires_at": "2000-01-01T00:00:00Z"}
SCOPES = ["org:read", "org:write", "keys:write", "hub:read", "policy:write"]


def _error(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]


def _both(send) -> tuple[tuple[int, dict], tuple[int, dict]]:
    """(status, error) answered in English (no header), then with Accept-Language: zh-CN."""
    english = send({})
    chinese = send(ZH)
    return (english.status_code, _error(english)), (chinese.status_code, _error(chinese))


def _assert_translated(pair, status: int, code: str, english: str, chinese: str | None = None):
    (en_status, en_error), (zh_status, zh_error) = pair
    assert en_status == zh_status == status, pair
    assert en_error["code"] == zh_error["code"] == code, pair
    assert en_error["message"] == english, en_error
    assert not CJK.search(en_error["message"]), en_error
    assert CJK.search(zh_error["message"]), zh_error
    assert zh_error["message"] != en_error["message"]
    if chinese is not None:
        assert zh_error["message"] == chinese, zh_error
    return en_error, zh_error


@pytest.fixture(autouse=True)
def _english_after():
    """A request activates its reader's language on the thread; the next test starts in the
    default again."""
    yield
    translation.activate(django_settings.LANGUAGE_CODE)


@pytest.fixture
def owner_client(alice, key_client):
    return key_client(alice, SCOPES)


# --- validation ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_missing_field_django_rest_framework_says_in_chinese(owner_client):
    pair = _both(lambda h: owner_client.post("/api/v1/departments/", {}, format="json", **h))
    _assert_translated(
        pair, 400, "invalid", "name: This field is required.", "name: 该字段是必填项。"
    )


@pytest.mark.django_db
def test_a_value_cadre_refuses_in_chinese(owner_client):
    pair = _both(lambda h: owner_client.post("/api/v1/api-keys/", PAST_KEY, format="json", **h))
    en, zh = _assert_translated(
        pair, 400, "invalid", "The expiry must be in the future.", "过期时间必须晚于当前时间。"
    )
    # The field details are translated too; their keys stay the field names.
    assert en["details"] == {"expires_at": ["Must be in the future."]}
    assert zh["details"] == {"expires_at": ["必须晚于当前时间。"]}


@pytest.mark.django_db
def test_a_body_nested_too_deeply_in_chinese(owner_client):
    body = "[" * 100 + "]" * 100
    pair = _both(
        lambda h: owner_client.generic(
            "POST", "/api/v1/departments/", body, content_type="application/json", **h
        )
    )
    _assert_translated(
        pair,
        400,
        "parse_error",
        "The JSON body nests deeper than 64 levels.",
        "JSON 请求体的嵌套超过 64 层。",
    )


# --- not found, conflict, permission ---------------------------------------------------------


@pytest.mark.django_db
def test_an_unknown_object_is_not_found_in_chinese(owner_client):
    pair = _both(lambda h: owner_client.get("/api/v1/departments/999999999/", **h))
    _assert_translated(pair, 404, "not_found", "Not found.", "未找到。")


@pytest.mark.django_db
def test_an_unknown_endpoint_in_chinese(owner_client):
    pair = _both(lambda h: owner_client.get("/api/v1/no-such-thing/", **h))
    _assert_translated(
        pair,
        404,
        "not_found",
        "No API endpoint at /api/v1/no-such-thing/.",
        "/api/v1/no-such-thing/ 处没有 API 端点。",
    )


@pytest.mark.django_db
def test_an_unknown_skill_in_chinese(owner_client):
    pair = _both(lambda h: owner_client.get("/api/v1/hub/skills/@nobody/nothing/", **h))
    _assert_translated(
        pair, 404, "skill_not_found", "No skill @nobody/nothing.", "没有技能 @nobody/nothing。"
    )


@pytest.mark.django_db
def test_a_duplicate_is_a_conflict_in_chinese(org_a, owner_client):
    DepartmentFactory(organization=org_a, name="Sales")
    pair = _both(
        lambda h: owner_client.post("/api/v1/departments/", {"name": "Sales"}, format="json", **h)
    )
    _assert_translated(
        pair,
        409,
        "duplicate",
        "A department with this name exists at this level.",
        "此层级已存在同名部门。",
    )


@pytest.mark.django_db
def test_a_missing_permission_in_chinese(bob, client_for):
    client = client_for(bob)
    pair = _both(lambda h: client.post("/api/v1/departments/", {"name": "Ops"}, format="json", **h))
    (en_status, en), (zh_status, zh) = pair
    assert en_status == zh_status == 403 and en["code"] == zh["code"] == "permission_denied"
    permission = re.search(r"'([a-z_]+\.[a-z_]+)'", en["message"]).group(1)
    assert en["message"] == f"You do not have the '{permission}' permission."
    assert zh["message"] == f"你没有“{permission}”权限。"


@pytest.mark.django_db
def test_an_invalid_masking_rule_in_chinese(owner_client):
    pair = _both(
        lambda h: owner_client.post(
            "/api/v1/masking/rules/",
            {"name": "r", "entity_type": "x", "kind": "pattern", "pattern": "a"},
            format="json",
            **h,
        )
    )
    _en, zh = _assert_translated(
        pair, 400, "invalid", "The masking rule is not valid.", "脱敏规则无效。"
    )
    assert CJK.search(zh["details"]["entity_type"][0])


# --- the edges: authentication, throttling, size, media type ---------------------------------


@pytest.mark.django_db
def test_no_credentials_in_chinese():
    client = APIClient()
    pair = _both(lambda h: client.get("/api/v1/departments/", **h))
    _assert_translated(
        pair, 401, "not_authenticated", "Authentication credentials were not provided."
    )


@pytest.mark.django_db
def test_too_many_failed_authentications_in_chinese(settings):
    settings.CADRE_API_THROTTLE_RATES = {
        **settings.CADRE_API_THROTTLE_RATES,
        "auth_failure": "2/5m",
    }
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer cadre_nothing_wrong")
    for _attempt in range(2):
        assert client.get("/api/v1/departments/").status_code == 401
    english = client.get("/api/v1/departments/")
    chinese = client.get("/api/v1/departments/", **ZH)
    assert english.status_code == chinese.status_code == 429
    en, zh = _error(english), _error(chinese)
    assert en["code"] == zh["code"] == "throttled"
    assert en["message"].startswith("Too many failed authentication attempts from this address.")
    assert zh["message"].startswith("此地址的身份验证失败次数过多")
    assert english["Retry-After"] and chinese["Retry-After"]


@pytest.mark.django_db
def test_a_body_too_large_in_chinese(owner_client):
    body = json.dumps({"name": "x" * 2000})
    with override_settings(CADRE_MAX_BODY_BYTES=1000):
        pair = _both(
            lambda h: owner_client.generic(
                "POST", "/api/v1/departments/", body, content_type="application/json", **h
            )
        )
    _assert_translated(
        pair,
        413,
        "payload_too_large",
        f"The request body is {len(body)} bytes; the limit is 1000 bytes.",
        f"请求体为 {len(body)} 字节，上限为 1000 字节。",
    )


@pytest.mark.django_db
def test_an_unsupported_media_type_in_chinese(owner_client):
    pair = _both(
        lambda h: owner_client.generic(
            "POST", "/api/v1/departments/", "name=x", content_type="text/plain", **h
        )
    )
    _assert_translated(
        pair, 415, "unsupported_media_type", 'Unsupported media type "text/plain" in request.'
    )


# --- the member's own language ---------------------------------------------------------------


@pytest.mark.django_db
def test_a_member_who_reads_chinese_gets_chinese_without_the_header(alice, key_client):
    alice.language = "zh-hans"
    alice.save(update_fields=["language"])
    client = key_client(alice, SCOPES)
    answer = client.post("/api/v1/api-keys/", PAST_KEY, format="json")
    assert answer.status_code == 400
    assert _error(answer) == {
        "code": "invalid",
        "message": "过期时间必须晚于当前时间。",
        "details": _error(answer)["details"],
    }
    missing = client.get("/api/v1/hub/skills/@nobody/nothing/")
    assert missing.status_code == 404
    assert _error(missing)["message"] == "没有技能 @nobody/nothing。"


@pytest.mark.django_db
def test_an_english_colleague_in_the_same_organization_reads_english(alice, bob, key_client):
    alice.language = "zh-hans"
    alice.save(update_fields=["language"])
    bob.language = "en"
    bob.roles = ["it_admin"]
    bob.save(update_fields=["language", "roles"])
    client = key_client(bob, ["keys:write", "org:read"])
    answer = client.post("/api/v1/api-keys/", PAST_KEY, format="json", **ZH)
    assert answer.status_code == 400
    assert _error(answer)["message"] == "The expiry must be in the future."
