"""The DIRECTORY recognizer: members' names (Chinese and Latin), e-mails, mobiles and IM ids,
context rules for given names and names that are ordinary words, refresh on member changes."""

from __future__ import annotations

import pytest

from cadre.governance.masking.directory import Directory
from cadre.governance.masking.engine import get_engine
from cadre.tenancy.models import IMIdentity

MEMBERS = [
    {"names": ["张伟明", "Weiming Zhang"],
     "contacts": ["zwm@acme.test", "13912345678", "ou_7d8a6e6df76"]},
    {"names": ["李娜"], "contacts": ["+8613700001111"]},
    {"names": ["高兴"], "contacts": []},  # a name that is an ordinary word ("glad")
    {"names": ["欧阳明月"], "contacts": []},
    {"names": ["Alice"], "contacts": ["U012ABCDEF"]},
    {"names": ["Will"], "contacts": []},  # an ordinary English word
]  # fmt: skip


def hits(text: str) -> list[str]:
    return [text[d.start : d.end] for d in Directory(MEMBERS).scan(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("张伟明说下午开会", ["张伟明"]),
        ("请Weiming Zhang确认", ["Weiming Zhang"]),
        ("cc zhang weiming please", ["zhang weiming"]),  # either order, any case
        ("李娜的报价单呢", ["李娜"]),
        ("@伟明 看下这个", ["伟明"]),  # given name after @
        ("伟明，你看下这个", ["伟明"]),  # given name, addressed
        ("找明月要一下", ["明月"]),  # given name of a compound surname, after a verb of address
        ("欧阳明月在吗", ["欧阳明月"]),
        ("高兴总在吗", ["高兴"]),  # an ordinary-word name with a title
        ("@高兴 看一下", ["高兴"]),
        ("Alice will call back", ["Alice"]),
        ("@Will please check", ["Will"]),
        ("ping U012ABCDEF on slack", ["U012ABCDEF"]),
        ("飞书 ou_7d8a6e6df76 是他", ["ou_7d8a6e6df76"]),
        ("打13700001111找她", ["13700001111"]),
    ],
)
def test_members_are_found(text, expected):
    assert hits(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "今天很高兴，项目上线了",  # ordinary word, no person cue
        "很高兴见到你",
        "伟明集团的新闻",  # a given name with no cue
        "明月几时有",
        "alice in wonderland",  # a one-word Latin name is matched as written
        "we will ship it tomorrow",
        "Will it work?",  # an ordinary word without @ or a title
        "Malice is not a name",  # inside a longer word
        "U012ABCDEFG",  # an IM id inside a longer token
    ],
)
def test_ordinary_words_and_partial_words_are_not_members(text):
    assert hits(text) == []


def test_the_full_name_wins_over_the_given_name_inside_it():
    assert hits("@张伟明 你好") == ["张伟明"]


@pytest.mark.django_db
def test_directory_masks_members_and_refreshes_when_they_change(org_a, make_member):
    member = make_member(display_name="王小川", email="xc.wang@acme.test", mobile="13612345678")
    engine = get_engine()
    text = "王小川的手机13612345678，飞书ou_abc123xyz"
    assert [d.type for d in engine.analyze(text, organization=org_a)] == ["DIRECTORY", "CN_PHONE"]
    IMIdentity.objects.create(
        organization=org_a, member=member, platform="feishu", platform_user_id="ou_abc123xyz"
    )
    found = engine.analyze(text, organization=org_a)
    assert [(d.type, text[d.start : d.end]) for d in found] == [
        ("DIRECTORY", "王小川"),
        ("CN_PHONE", "13612345678"),
        ("DIRECTORY", "ou_abc123xyz"),
    ]
    member.display_name = "王大川"
    member.save()
    assert [d.type for d in engine.analyze("王小川和王大川", organization=org_a)] == ["DIRECTORY"]
    masked = engine.mask("王大川说好的", organization=org_a).text
    assert masked == "<MEMBER_1>说好的"


@pytest.mark.django_db
def test_another_organizations_members_are_not_in_the_directory(org_a, org_b, make_member):
    make_member(display_name="赵子龙", organization=org_b)
    assert get_engine().analyze("赵子龙来了", organization=org_a) == []
    assert [d.type for d in get_engine().analyze("赵子龙来了", organization=org_b)] == ["DIRECTORY"]
