"""The offline skill draft reads as instructions: each step is the correction's lesson in
imperative form (English and Chinese), never the way the employee said the answer was wrong
("no, that's wrong", "actually", "其实", "不对"); its name says what the lesson is about; and the
task it was learned from is quoted only masked."""

from __future__ import annotations

import pytest

from cadre.skills import drafting
from hub.validation import validate_files

LESSONS = [
    (
        "No, that's wrong: our discount limit is 12%, not 10%",
        ["State the discount limit as 12% (not 10%)"],
    ),
    (
        "Actually, use numbered lists instead of bullet points in weekly reports.",
        ["Use numbered lists instead of bullet points in weekly reports"],
    ),
    (
        "That's not right. The payment terms are 30 days, not 60.",
        ["State the payment terms as 30 days (not 60)"],
    ),
    (
        "No. Our office is in Hangzhou, not Shanghai.",
        ["State that the office is in Hangzhou (not Shanghai)"],
    ),
    ("Wrong - it's 12%, not 10%.", ["Use 12% (not 10%)"]),
    (
        "In fact, the deadline should be Friday, not Monday.",
        ["State the deadline as Friday (not Monday)"],
    ),
    (
        "You should not use emojis in customer emails.",
        ["Do not use emojis in customer emails"],
    ),
    (
        "Don't round the totals; show two decimals.",
        ["Do not round the totals", "Show two decimals"],
    ),
    ("We always cc the account manager on quotes.", ["Always cc the account manager on quotes"]),
    (
        "Hmm, please always double-check the currency before sending a quote.",
        ["Always double-check the currency before sending a quote"],
    ),
    ("You forgot the risks section; next time also include one.", ["Include the risks section"]),
    (
        "Next time, also include the booth budget and the follow-up list.",
        ["Include the booth budget", "Include the follow-up list"],
    ),
    ("不对，我们的折扣上限是12%，不是10%。", ["折扣上限是12%，不是10%：回答时以此为准"]),
    ("错了，付款期限不是60天，是30天。", ["付款期限是30天，不是60天：回答时以此为准"]),
    ("其实，周报要用编号列表，不要用项目符号。", ["周报要用编号列表，不要用项目符号"]),
    ("其实报价单要用人民币，不要用美元。", ["报价单要用人民币，不要用美元"]),
    ("你漏了风险部分，下次也要加上。", ["加上风险部分"]),
    ("你忘了写预算，以后都要包括预算。", ["写上预算"]),
    ("报告缺少结论部分，以后请补充。", ["报告要有结论部分"]),
    ("你没有列出截止日期，下次别忘了。", ["列出截止日期"]),
    ("下次记得附上参会人员名单。", ["附上参会人员名单"]),
]
LEAD_INS = ("no,", "no.", "that's", "wrong", "actually", "in fact", "hmm", "其实", "不对", "错了")


@pytest.mark.parametrize(("correction", "steps"), LESSONS)
def test_the_lesson_is_an_instruction_without_the_lead_in(correction, steps):
    items = drafting.correction_items(correction)
    assert items == steps
    for item in items:
        assert not item.lower().startswith(LEAD_INS), item


def test_the_lessons_cover_both_languages_and_every_kind_of_correction():
    chinese = [c for c, _ in LESSONS if any("\u4e00" <= ch <= "\u9fff" for ch in c)]
    assert len(LESSONS) - len(chinese) >= 12 and len(chinese) >= 8


@pytest.mark.parametrize(("correction", "steps"), LESSONS)
def test_the_offline_draft_is_a_valid_skill_whose_steps_are_the_lesson(correction, steps):
    draft = drafting.offline_correction_draft(
        request="What discount can I offer the new distributor?",
        output="Up to 10%.",
        correction=correction,
        base_skill_md=None,
    )
    text = draft.files["SKILL.md"]
    report = validate_files({"SKILL.md": text.encode()}, folder_name=draft.name)
    assert report.ok, report.problems
    numbered = [line for line in text.splitlines() if line[:1].isdigit()]
    assert numbered == [f"{i}. {drafting._end(step)}" for i, step in enumerate(steps, start=1)]
    # The correction is never quoted as it was said, nor as "When asked to no, that's wrong".
    assert correction not in text
    assert "When asked to" not in text and "Correction that taught this" not in text
    assert draft.summary == f"New skill {draft.name}: " + " ".join(
        drafting._end(step) for step in steps
    )


def test_the_issues_correction_drafts_discount_limit_not_wrong_discount_limit():
    draft = drafting.offline_correction_draft(
        request="What discount can we give on the annual plan?",
        output="You can give up to 10%.",
        correction="No, that's wrong: our discount limit is 12%, not 10%",
        base_skill_md=None,
    )
    assert draft.name == "discount-limit"
    text = draft.files["SKILL.md"]
    assert "1. State the discount limit as 12% (not 10%)." in text
    assert 'description: "State the discount limit as 12% (not 10%).' in text
    assert "wrong" not in text.lower()


@pytest.mark.parametrize(
    ("correction", "name"),
    [
        ("Actually, use numbered lists instead of bullet points in weekly reports.",
         "numbered-lists-weekly-reports"),
        ("You forgot the risks section; next time also include one.", "risks-section"),
        ("In fact, the deadline should be Friday, not Monday.", "deadline-friday"),
        ("You should not use emojis in customer emails.", "emojis-customer-emails"),
    ],
)  # fmt: skip
def test_the_name_says_what_the_lesson_is_about(correction, name):
    assert drafting.lesson_name(drafting.correction_items(correction)) == name


def test_a_chinese_lesson_is_named_from_the_masked_task_or_left_for_a_reviewer_to_rename():
    items = drafting.correction_items("其实，周报要用编号列表，不要用项目符号。")
    assert drafting.lesson_name(items, fallback_text="Write the weekly report") == "weekly-report"
    generated = drafting.lesson_name(items, fallback_text="帮我写周报")
    assert generated.startswith("team-practice-") and len(generated) == len("team-practice-") + 6
    assert generated != drafting.lesson_name(["加上风险部分"])  # two lessons, two names


def test_the_task_is_quoted_masked_never_raw():
    request = "Draft the quote for Wang Fang, call her on 13812345678 or wang.fang@example.com."
    draft = drafting.offline_correction_draft(
        request=request,
        output="Here is the quote.",
        correction="Next time, also include the delivery date.",
        base_skill_md=None,
    )
    text = draft.files["SKILL.md"]
    assert "13812345678" not in text and "wang.fang@example.com" not in text
    assert request not in text
    assert "## When to use" in text and "Draft the quote for" in text  # masked, still useful
    assert "1. Include the delivery date." in text


def test_a_new_version_draft_appends_the_lesson_to_the_skill_in_context():
    base = "---\nname: weekly-report\ndescription: Write the weekly report.\n---\n\n# Weekly\n"
    draft = drafting.offline_correction_draft(
        request="Write my weekly report.",
        output="- done",
        correction="Actually, use numbered lists instead of bullet points.",
        base_skill_md=base,
        base_name="weekly-report",
    )
    text = draft.files["SKILL.md"]
    assert draft.kind == "new_version" and draft.name == "weekly-report"
    assert text.startswith(base.rstrip("\n").rsplit("\n\n", 1)[0])
    assert "- Use numbered lists instead of bullet points." in text
    assert "Actually" not in text


def test_a_skill_md_edit_replaces_only_the_fields_given():
    base = (
        "---\nname: weekly-report\ndescription: Write the weekly report.\nlicense: MIT\n---\n\n"
        "# Weekly\n\n1. Use bullets.\n"
    )
    body_only = drafting.skill_md_edited(base, body="# Weekly\n\n1. Use numbered lists.")
    assert body_only == base.replace("Use bullets", "Use numbered lists")
    renamed = drafting.skill_md_edited(base, name="weekly-status", description="Weekly status.")
    assert "name: weekly-status" in renamed and "description: Weekly status." in renamed
    assert "license: MIT" in renamed and renamed.endswith("# Weekly\n\n1. Use bullets.\n")
    assert drafting.skill_md_edited(base, name="weekly-report", body="# Weekly\n\n1. Use bullets.")
    assert drafting.skill_md_edited(base) == base
