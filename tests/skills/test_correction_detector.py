"""The correction detector: a correction of how the agent did its task (an omission in the
answer, or an addition to the answer's content made a standing rule) proposes a skill; a
stated preference, a fact about the person, a plain request or small talk does not — in
English and in Chinese. The offline draft's steps come from the correction's clauses."""

from __future__ import annotations

import pytest

from cadre.skills import drafting

PREFERENCES = [
    "From now on, always write reports in bullet points, and my manager is Li Wei.",
    "I prefer short answers.",
    "Please always reply in Chinese.",
    "My manager is Li Wei.",
    "Call me Sam.",
    "I like tables more than long paragraphs.",
    "Going forward, keep your answers under 200 words.",
    "I'm based in Shanghai, so use Beijing time for my meetings.",
    "In future, use a formal tone with me.",
    "I usually work from 9 to 6.",
    "Always address me by my first name.",
    "I don't like emojis in replies.",
    "Please be more concise from now on.",
    "Remember that my phone number is 13812345678.",
    "Make sure you always speak English with me.",
    "Next time, keep it shorter.",
    "I work in the sales department and report to the regional director.",
    "Help me prepare the meeting with the Shenzhen distributor.",
    "Please add a meeting with Li Wei on Friday at 3pm.",
    "Thanks, that looks good.",
    "以后请用中文回复我。",
    "我喜欢简洁的回答。",
    "我的经理是李伟。",
    "以后叫我小王就行。",
    "我更喜欢用表格展示数据。",
    "下次回答短一点。",
    "我习惯早上九点开会。",
    "记得我是素食者。",
    "我不喜欢太正式的语气。",
    "以后都用要点列出来。",
    "我忘了密码，怎么办？",
    "帮我准备一下明天的会议。",
]
CORRECTIONS = [
    "You forgot the risks section; next time also include one.",
    "You missed the budget line. Please add it next time.",
    "Next time, also include the attendee list.",
    "The summary was missing the action items - always add them.",
    "You left out the deadlines; include them from now on.",
    "In future, also attach the source links.",
    "You didn't mention the competitors. Next time cover them too.",
    "Going forward, add a short risk assessment at the end of each report.",
    "The report lacks a conclusion; please add one every time.",
    "You should have included the contract number.",
    "Don't forget to add the meeting room next time.",
    "You failed to cite the data sources.",
    "There was no agenda in the invite. Whenever you draft one, include the agenda.",
    "你漏了风险部分，下次也要加上。",
    "下次记得附上参会人员名单。",
    "你忘了写预算，以后都要包括预算。",
    "报告缺少结论部分，以后请补充。",
    "以后每次都加上行动项。",
    "你没有列出截止日期，下次别忘了。",
    "下次还要把数据来源写上。",
]


@pytest.mark.parametrize("text", PREFERENCES)
def test_a_preference_fact_or_request_is_not_a_correction(text):
    assert not drafting.is_correction(text), drafting.correction_signals(text)


@pytest.mark.parametrize("text", CORRECTIONS)
def test_a_correction_of_the_answer_is_one(text):
    assert drafting.is_correction(text), drafting.correction_signals(text)


def test_the_sets_cover_both_languages():
    def chinese(texts):
        return [t for t in texts if any("\u4e00" <= c <= "\u9fff" for c in t)]

    assert len(PREFERENCES) >= 20 and len(CORRECTIONS) >= 15
    assert len(chinese(PREFERENCES)) >= 10 and len(chinese(CORRECTIONS)) >= 7


def test_a_one_off_revision_without_a_standing_rule_is_not_a_skill_lesson():
    assert not drafting.is_correction("Also include the Q3 numbers.")
    assert drafting.is_correction("Also include the Q3 numbers from now on.")


def test_an_affirmation_is_not_a_correction():
    assert drafting.is_affirmation("Yes, save it")
    assert not drafting.is_correction("Yes, save it")


@pytest.mark.parametrize(
    ("text", "items"),
    [
        (
            "You forgot the risks section; next time also include one.",
            ["Include the risks section"],
        ),
        (
            "Next time, also include the booth budget and the follow-up list.",
            ["Include the booth budget", "Include the follow-up list"],
        ),
        (
            "The summary was missing the action items - always add them.",
            ["Include the action items"],
        ),
        (
            "You didn't mention the competitors. Next time cover them too.",
            ["Mention the competitors"],
        ),
        ("下次记得附上参会人员名单。", ["附上参会人员名单"]),
    ],
)
def test_the_offline_steps_are_the_corrections_clauses(text, items):
    assert drafting.correction_items(text) == items
