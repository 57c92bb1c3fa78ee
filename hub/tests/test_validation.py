"""SKILL.md validation matrix: each problem comes with its path, line and a stable code."""

from __future__ import annotations

import pytest

from hub.validation import validate_files, validate_skill_md


def codes(report) -> set[str]:
    return {problem.code for problem in report.problems}


def test_valid_skill_has_no_problems_and_keeps_frontmatter():
    text = (
        "---\nname: pdf-tools\ndescription: Fill PDF forms.\nlicense: MIT\n"
        "compatibility: Needs python3\nmetadata:\n  author: acme\n  team: ops\n"
        "allowed-tools: Bash(python:*) Read\n---\n# Body\n"
    )
    report = validate_skill_md(text, folder_name="pdf-tools")
    assert report.ok and report.problems == []
    assert report.frontmatter["metadata"] == {"author": "acme", "team": "ops"}
    assert report.document.body_line == 11


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("PDF-tools", "name_format"),
        ("-pdf", "name_format"),
        ("pdf-", "name_format"),
        ("pdf--tools", "name_format"),
        ("pdf_tools", "name_format"),
        ("pdf tools", "name_format"),
        ("pdfé", "name_format"),
        ("a" * 65, "name_too_long"),
        ("other-name", "name_folder_mismatch"),
    ],
)
def test_bad_names_are_reported_on_the_name_line(name, code):
    text = f"---\ndescription: x\nname: {name}\n---\nbody\n"
    report = validate_skill_md(text, folder_name="pdf-tools")
    problem = next(p for p in report.problems if p.code == code)
    assert (problem.path, problem.line, problem.severity) == ("SKILL.md", 3, "error")
    assert not report.ok


def test_name_of_64_characters_is_accepted():
    name = "a" * 64
    assert validate_skill_md(f"---\nname: {name}\ndescription: x\n---\nb\n", folder_name=name).ok


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("no frontmatter\n", "frontmatter_missing", 1),
        ("---\nname: a\n", "frontmatter_unclosed", 1),
        ("---\nname: a\ndescription: [x\n---\nb\n", "frontmatter_yaml", 3),
        ("---\nname: a\nname: b\ndescription: d\n---\nb\n", "frontmatter_yaml", 3),
        ("---\n- a\n- b\n---\nb\n", "frontmatter_not_mapping", 2),
        ("---\ndescription: d\n---\nb\n", "name_missing", 2),
        ("---\nname: a\n---\nb\n", "description_missing", 2),
        ("---\nname: a\ndescription: ''\n---\nb\n", "description_empty", 3),
        ("---\nname: a\ndescription: " + "d" * 1025 + "\n---\nb\n", "description_too_long", 3),
        ("---\nname: a\ndescription: d\nversion: 1.0.0\n---\nb\n", "unknown_key", 4),
        (
            "---\nname: a\ndescription: d\ncompatibility: " + "c" * 501 + "\n---\nb\n",
            "compatibility_too_long",
            4,
        ),
        (
            "---\nname: a\ndescription: d\nmetadata:\n  nested:\n    x: y\n---\nb\n",
            "metadata_not_string_map",
            4,
        ),
        ("---\nname: a\ndescription: d\nmetadata: plain\n---\nb\n", "metadata_not_string_map", 4),
    ],
)
def test_frontmatter_problems_carry_their_line(text, code, line):
    report = validate_skill_md(text, folder_name="a")
    problem = next(p for p in report.problems if p.code == code)
    assert problem.line == line, problem
    assert not report.ok


def test_version_key_hint_points_to_the_hub():
    report = validate_skill_md("---\nname: a\ndescription: d\nversion: 1\n---\nb\n")
    assert "set when publishing to the Hub" in report.problems[0].message


def test_every_problem_is_reported_not_just_the_first():
    report = validate_skill_md("---\nname: Bad--Name\ndescription: ''\nextra: 1\n---\n\n")
    assert {"name_format", "description_empty", "unknown_key", "body_empty"} <= codes(report)
    # one problem per field: skills-ref's second opinion does not duplicate ours
    assert len([p for p in report.problems if p.code == "skills_ref"]) == 0


def test_empty_body_is_only_a_warning():
    report = validate_skill_md("---\nname: a\ndescription: d\n---\n\n", folder_name="a")
    assert report.ok
    assert [(p.code, p.severity, p.line) for p in report.problems] == [("body_empty", "warning", 5)]


def test_missing_skill_md_and_wrong_case():
    assert codes(validate_files({"README.md": b"x"})) == {"skill_md_missing"}
    report = validate_files({"skill.md": b"x"})
    assert (
        report.problems[0].path == "skill.md" and "exactly 'SKILL.md'" in report.problems[0].message
    )


def test_non_utf8_skill_md_reports_the_line():
    report = validate_files({"SKILL.md": b"---\nname: a\n\xff\n"})
    assert [(p.code, p.line) for p in report.problems] == [("not_utf8", 3)]


def test_unusual_directories_warn_once_per_folder():
    files = {
        "SKILL.md": b"---\nname: a\ndescription: d\n---\nbody\n",
        "scripts/x.sh": b"echo",
        "misc/a.txt": b"",
        "misc/b.txt": b"",
    }
    report = validate_files(files, folder_name="a")
    assert report.ok
    assert [(p.path, p.code) for p in report.problems] == [("misc/a.txt", "unusual_directory")]


def test_byte_order_mark_is_tolerated():
    assert validate_files({"SKILL.md": "\ufeff---\nname: a\ndescription: d\n---\nb\n".encode()}).ok
