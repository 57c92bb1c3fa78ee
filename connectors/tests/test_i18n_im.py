# ruff: noqa: F811 - the fixtures imported from test_end_to_end are parameters here
"""IM in the reader's language (issue #33): on every platform, through its loopback fake, an
employee whose language is Chinese receives the system messages and cards in Chinese — the
offline model's reply, the confirmation card and its decided state, the refusal of a used
button, the notice of a cancelled request, the no-assistant reply, a notice, an alert and the
skill proposal's card — while an English colleague in the same organization receives English.
Every card kind rendered on every platform in Chinese has no English sentence."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.test import Client
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy

from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle.services import run_cancel
from cadre.agents.runtime.records import delivery as run_delivery
from cadre.governance import alerts
from cadre.governance.models import Alert
from cadre.llm.offline import OfflineProvider
from cadre.skills.models import SkillProposal
from cadre.tenancy.actors import member_actor
from cadre.tenancy.services.notices import notice_send
from connectors.base import registry
from connectors.cards import decisions, proposals
from connectors.models import Delivery, InboundEvent
from connectors.outbound.alerts import alert_im_deliver
from connectors.tests.helpers import webhook_post
from connectors.tests.test_end_to_end import (  # noqa: F401 - fixtures and drivers
    SlackDriver,
    WebhookDriver,
    bob_agent,
    connector,
    deliver,
    driver,
)
from tests.factories import IMIdentityFactory, MemberFactory
from tests.i18n.untranslated import english_sentences_in_text

pytestmark = pytest.mark.django_db

PLATFORMS = ["feishu", "wecom", "dingtalk", "slack", "webhook"]
# Keys of card JSON that hold no text a person reads (tokens, ids, styles, machine states).
NOT_TEXT = {
    "value",
    "key",
    "approve_params",
    "reject_params",
    "task_id",
    "outTrackId",
    "tag",
    "type",
    "style",
    "template",
    "card_type",
    "action_id",
    "block_id",
    "status",
    "confirmation_id",
    "expires",
    "expires_at",
    "decision",
    "decided_at",
    "id",
    "decided_by",
}


def card_texts(card) -> str:
    """Every string of a card a person reads, one a line."""
    found: list[str] = []

    def walk(value, key=""):
        if key in NOT_TEXT:
            return
        if isinstance(value, dict):
            for name, item in value.items():
                walk(item, name)
        elif isinstance(value, list):
            for item in value:
                walk(item, key)
        elif isinstance(value, str):
            found.append(value)

    walk(card)
    return "\n".join(found)


def updates_text(driver) -> str:
    """What reached the platform's card-update API, nested JSON decoded (Chinese readable)."""

    def decoded(value):
        # A card sent as a JSON string inside the body (Feishu's `content`) is read as JSON.
        if isinstance(value, str) and value[:1] in "{[":
            try:
                return decoded(json.loads(value))
            except ValueError:
                return value
        if isinstance(value, dict):
            return {key: decoded(item) for key, item in value.items()}
        if isinstance(value, list):
            return [decoded(item) for item in value]
        return value

    bodies = [u if isinstance(u, dict) else u.json() for u in driver.updates()]
    return json.dumps(decoded(bodies), ensure_ascii=False)


def im_alert(owner, member, title: str) -> Alert:
    rule = alerts.alert_rule_create(
        actor=member_actor(owner),
        name=f"spend {title}",
        kind="denied_spike",
        channels=[{"kind": "im", "members": [member.pk]}],
    )
    return Alert.objects.create(
        organization=member.organization,
        rule=rule,
        fingerprint="f" * 64,
        severity="critical",
        title=title,
    )


def chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


# --- every card kind, every platform --------------------------------------------------------

CONFIRMATION = SimpleNamespace(
    pk=7,
    summary="张伟的智能体想向全体员工发送一条消息。",
    expires_at=timezone.now() + timedelta(hours=1),
    title="",
    details_for_card=[("工具", "im_send"), ("风险", "中")],
)


def _proposal():
    return SimpleNamespace(
        pk=3,
        member_id=1,
        name="项目周报",
        correction="下次也写上风险部分。",
        summary="周报里加上风险部分。",
        created_at=timezone.now(),
        package_id=None,
    )


def _cards(language: str) -> dict[str, list[tuple[str, dict]]]:
    """Every card kind per platform, rendered in `language`."""
    now = timezone.now()
    rendered = {}
    with translation.override(language):
        for name in PLATFORMS:
            cards = registry()[name].part("cards")
            confirmation = decisions.card_content(CONFIRMATION, 1)
            proposal = proposals.card_content(_proposal())
            kinds = [
                ("confirmation", cards.confirmation_card(confirmation)),
                ("proposal", cards.confirmation_card(proposal)),
            ]
            for content, words in (
                (confirmation, decisions.DECIDED_WORDS),
                (proposal, proposals.WORDS),
            ):
                decided = decisions.CardContent(
                    confirmation_ref=content.confirmation_ref,
                    title="",
                    summary=content.summary,
                    expires_at=now,
                    approve_value={},
                    reject_value={},
                    approved_word=str(words[0]),
                    rejected_word=str(words[1]),
                )
                for decision in ("approve", "reject"):
                    for decided_by in ("王芳", ""):
                        card = cards.decided_card(
                            decided, decided_by=decided_by, decision=decision, decided_at=now
                        )
                        kinds.append((f"decided {decision} {decided_by!r}", card))
            rendered[name] = kinds
    return rendered


def test_every_card_kind_on_every_platform_reads_in_chinese():
    for platform, kinds in _cards("zh-hans").items():
        for kind, card in kinds:
            text = card_texts(card)
            assert english_sentences_in_text(text) == [], (platform, kind, text)
        everything = json.dumps([card for _, card in kinds], ensure_ascii=False)
        if platform != "webhook":  # the webhook's decided card is data: code, who, when
            assert "已批准" in everything and "已保存为技能" in everything, platform
        assert "批准" in everything and "保存为技能" in everything, platform


def test_the_same_cards_read_in_english_for_an_english_reader():
    for platform, kinds in _cards("en").items():
        everything = json.dumps([card for _, card in kinds], ensure_ascii=False)
        assert "Approve" in everything and "Save as skill" in everything, platform
        assert "批准" not in everything and "保存为技能" not in everything, platform


def test_the_offline_model_speaks_the_active_language():
    provider = OfflineProvider(model="offline-1")
    messages = [
        {"role": "system", "content": "## Relevant memories\n- 报销上限是 500 元"},
        {"role": "user", "content": "报销上限是多少？"},
    ]
    with translation.override("zh-hans"):
        reply = provider.decide(messages, []).text
    assert reply.startswith("离线模型：未配置语言模型。") and "报销上限是 500 元" in reply
    assert english_sentences_in_text(reply) == [], reply
    with translation.override("en"):
        english = provider.decide(messages, []).text
    assert english.startswith("Offline model: no language model is configured. ")
    assert "Retrieved for this request: memory: “报销上限是 500 元”" in english


# --- through each platform's loopback fake --------------------------------------------------


@pytest.fixture
def chinese_bob(bob):
    bob.language = "zh-hans"
    bob.save(update_fields=["language"])
    return bob


def texts_to(driver, user_id: str) -> list[str]:
    """The texts sent in answer to `user_id`'s messages and clicks, and to them directly."""
    rows = Delivery.objects.filter(kind__in=["text", "markdown"]).order_by("pk")
    return [
        row.body["text"]
        for row in rows
        if row.recipient == user_id
        or (row.inbound_event is not None and row.inbound_event.sender_id == user_id)
    ]


def assert_chinese(text: str) -> None:
    assert chinese(text) and english_sentences_in_text(text) == [], text


def test_a_chinese_employee_receives_chinese_and_an_english_colleague_english(
    driver,
    connector,
    chinese_bob,
    alice,
    bob_agent,
    celery_eager,
    django_capture_on_commit_callbacks,
):
    bob = chinese_bob
    capture = django_capture_on_commit_callbacks

    # The offline model's reply.
    event = deliver(driver, connector, "你好", "evt-hello", capture)
    run = Run.objects.get(pk=int(event.run_ref))
    (reply,) = texts_to(driver, driver.user_id)
    assert reply.startswith("离线模型：") and reply == run.output["text"]
    assert english_sentences_in_text(reply) == [], reply
    assert reply in driver.replies()  # it reached the platform

    # A high-risk call: the confirmation card's buttons and expiry in Chinese.
    event = deliver(driver, connector, "send hello to group:all-staff", "evt-risky", capture)
    risky = Run.objects.get(pk=int(event.run_ref))
    card = Delivery.objects.get(kind="card")
    sent = json.dumps(card.body["card"], ensure_ascii=False)
    assert "批准" in sent and "驳回" in sent and "Approve" not in sent
    # Its data (names, the call's arguments) stays as it is; every sentence is Chinese.
    shown = card_texts(card.body["card"])
    for data in ("Bob", "All staff", '{"text": "hello", "to": ["group:all-staff"]}'):
        shown = shown.replace(data, "")
    assert english_sentences_in_text(shown) == [], sent
    value = driver.approve_value()

    # Alice (English) pressing bob's button is refused in English; bob's click in Chinese.
    IMIdentityFactory(
        member=alice, platform=driver.platform, platform_user_id=f"{driver.user_id}-alice"
    )
    with capture(execute=True):
        response = driver.click(connector, value, f"{driver.user_id}-alice", "click-0")
    alice_refusal = InboundEvent.objects.get(kind="card_action", status="ignored").error
    assert alice_refusal == "Only the person this card was sent to can decide here."
    with capture(execute=True):
        response = driver.click(connector, value, driver.user_id, "click-1")
    if driver.platform == "feishu":
        toast = response.json()["toast"]["content"]
        assert toast == "Bob 已批准，正在记录决定…"
    updated = updates_text(driver)
    if driver.platform != "webhook":
        assert "已批准" in updated and "Approved" not in updated, updated
    # A replayed click: refused in bob's language.
    with capture(execute=True):
        driver.click(connector, value, driver.user_id, "click-2")
    refusal = InboundEvent.objects.filter(kind="card_action", status="ignored").latest("pk").error
    assert_chinese(refusal)
    risky.refresh_from_db()
    assert risky.status == Run.Status.COMPLETED

    # A request cancelled by an English-speaking admin: bob is told in Chinese.
    event = deliver(driver, connector, "send hi to group:all-staff", "evt-cancel", capture)
    waiting = Run.objects.get(pk=int(event.run_ref))
    assert waiting.status == Run.Status.WAITING
    with capture(execute=True):
        run_cancel(actor=member_actor(alice), run=waiting)
    cancelled = run_delivery.run_reply(Run.objects.get(pk=waiting.pk)).text
    assert cancelled == "此请求在完成前已被取消。如仍需要，请重新发送。"
    assert cancelled in texts_to(driver, driver.user_id)

    # A notice and an alert, texted to bob in Chinese.
    with capture(execute=True):
        notice_send(
            member=bob,
            kind="test",
            key="test:1",
            title=gettext_lazy("Confirmation needed"),
            body=gettext_lazy("Please ask your administrator if you need it sooner."),
        )
    alert = im_alert(alice, bob, "支出激增")
    alert_im_deliver(alert, {"members": [bob.pk]})
    sent = texts_to(driver, driver.user_id)
    assert "需要确认\n如需提前使用，请联系管理员。" in sent
    assert "【严重】支出激增" in sent
    for text in sent:
        if not text.startswith("离线模型："):  # its tool list names tools by their ids
            assert_chinese(text)


def test_an_english_colleague_receives_english(
    driver, connector, alice, bob, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    bob.language = "en"
    bob.save(update_fields=["language"])
    alice.organization.locale = "zh-hans"  # the organization's default is not theirs
    alice.organization.save(update_fields=["locale"])
    deliver(driver, connector, "hello", "evt-hello", capture)
    deliver(driver, connector, "send hello to group:all-staff", "evt-risky", capture)
    (reply,) = texts_to(driver, driver.user_id)
    assert reply.startswith("Offline model: no language model is configured. ")
    sent = json.dumps(Delivery.objects.get(kind="card").body["card"], ensure_ascii=False)
    assert "Approve" in sent and "批准" not in sent
    alert = im_alert(alice, bob, "Spend spike")
    alert_im_deliver(alert, {"members": [bob.pk]})
    assert "[CRITICAL] Spend spike" in texts_to(driver, driver.user_id)


def test_no_assistant_and_stranger_replies_follow_member_and_organization(
    driver, connector, alice, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    # An employee without an assistant, Chinese: told in Chinese.
    carol = MemberFactory(organization=alice.organization, display_name="Carol", roles=["employee"])
    carol.language = "zh-hans"
    carol.save(update_fields=["language"])
    IMIdentityFactory(member=carol, platform=driver.platform, platform_user_id="carol-1")
    deliver(driver, connector, "你好", "evt-carol", capture, user_id="carol-1")
    (no_agent,) = texts_to(driver, "carol-1")
    assert no_agent == "你好！你在此渠道还没有助手。请联系管理员为你开通。"
    # A stranger in an organization whose default is Chinese: told in Chinese.
    alice.organization.locale = "zh-hans"
    alice.organization.save(update_fields=["locale"])
    connector.organization.refresh_from_db()
    deliver(driver, connector, "你好", "evt-stranger", capture, user_id="stranger-1")
    (stranger,) = texts_to(driver, "stranger-1")
    assert_chinese(stranger)


def test_the_skill_proposal_card_reaches_a_chinese_employee_in_chinese(
    driver,
    connector,
    chinese_bob,
    bob_agent,
    celery_eager,
    django_capture_on_commit_callbacks,
):
    capture = django_capture_on_commit_callbacks
    deliver(
        driver,
        connector,
        "Prepare the project update for the Shanghai launch.",
        "evt-request",
        capture,
    )
    event = deliver(
        driver,
        connector,
        "You forgot the risks section; next time also include one.",
        "evt-correction",
        capture,
    )
    proposal = SkillProposal.objects.get(run_id=int(event.run_ref))
    card = Delivery.objects.get(kind="card", confirmation_ref=proposals.proposal_ref(proposal))
    sent = card_texts(card.body["card"])
    if driver.platform != "dingtalk":  # DingTalk's labels live in its card template
        assert "保存为技能" in sent and "忽略" in sent
    assert "将此保存为技能？" in sent and "原消息" in sent
    assert "Save as skill" not in sent and "From your message" not in sent
    value = driver.approve_value()
    with capture(execute=True):
        driver.click(connector, value, driver.user_id, "click-1")
    updated = updates_text(driver)
    if driver.platform != "webhook":
        assert "已保存为技能" in updated and "Saved as skill" not in updated


def test_a_member_without_a_language_is_written_to_in_the_locale_slack_reports(
    fake_api, alice, bob, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    driver = SlackDriver(fake_api)
    connector = driver.connector(alice)
    IMIdentityFactory(member=bob, platform="slack", platform_user_id=driver.user_id)
    driver.fake.locales[driver.user_id] = "zh-CN"
    deliver(driver, connector, "你好", "evt-1", django_capture_on_commit_callbacks)
    bob.refresh_from_db()
    assert bob.language == "" and bob.platform_language == "zh-hans"
    (reply,) = texts_to(driver, driver.user_id)
    assert reply.startswith("离线模型：")
    (asked,) = fake_api.calls("/api/users.info")
    assert asked.query == {"user": driver.user_id, "include_locale": "true"}
    # Asked once: the next message needs no lookup; a preference set in Cadre wins.
    bob.language = "en"
    bob.save(update_fields=["language"])
    deliver(driver, connector, "hello", "evt-2", django_capture_on_commit_callbacks)
    assert len(fake_api.calls("/api/users.info")) == 1
    assert texts_to(driver, driver.user_id)[-1].startswith("Offline model: ")


def test_a_webhook_event_stating_the_senders_locale_is_answered_in_it(
    fake_api, alice, bob, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    driver = WebhookDriver(fake_api)
    connector = driver.connector(alice)
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id=driver.user_id)

    def post(user: dict, event_id: str):
        with django_capture_on_commit_callbacks(execute=True):
            response = webhook_post(
                Client(),
                connector,
                {
                    "event_id": event_id,
                    "type": "message",
                    "text": "你好",
                    "user": user,
                    "chat": {"id": "chat-1", "type": "p2p"},
                },
            )
        assert response.status_code == 200

    # A member who chose no language: their event's locale is remembered and used.
    post({"id": driver.user_id, "locale": "zh-CN"}, "evt-1")
    bob.refresh_from_db()
    assert bob.platform_language == "zh-hans"
    assert texts_to(driver, driver.user_id)[0].startswith("离线模型：")
    # A stranger: told in the language their event states (the organization's is English).
    post({"id": "u-stranger", "locale": "zh-CN"}, "evt-2")
    (stranger,) = texts_to(driver, "u-stranger")
    assert_chinese(stranger)


def test_a_notice_is_written_in_its_members_language_whoever_sends_it(chinese_bob, alice):
    with translation.override("en"):  # e.g. an English reviewer's request caused it
        to_bob = notice_send(
            member=chinese_bob,
            kind="test",
            key="test:params",
            title=gettext_lazy("Saving it as a skill, %(name)s…"),
            body=gettext_lazy("Offline model: %(summary)s"),
            params={"name": "王芳", "summary": "…"},
        )
        to_alice = notice_send(
            member=alice,
            kind="test",
            key="test:params",
            title=gettext_lazy("Saving it as a skill, %(name)s…"),
            params={"name": "Wang Fang"},
        )
    assert (to_bob.title, to_bob.body) == ("正在保存为技能，王芳…", "离线模型：…")
    assert (to_alice.title, to_alice.body) == ("Saving it as a skill, Wang Fang…", "")
