"""SKILL.md validation: the Agent Skills format, every problem reported with its path and line.

The frontmatter is parsed with strictyaml (as the reference validator `skills-ref` does, so what
passes here passes there) to keep each key's line number; our checks report precise problems,
then `skills_ref.validator.validate_metadata` runs as a second opinion and any rule of it we do
not already cover is reported too. Cadre's name rule is the spec's ASCII one (skills-ref also
accepts other Unicode letters). The version is the Hub's business, not the frontmatter's.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import strictyaml
from skills_ref.validator import validate_metadata as skills_ref_validate

SKILL_FILE = "SKILL.md"
NAME_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
ALLOWED_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
KNOWN_DIRECTORIES = ("scripts", "references", "assets")


@dataclass(frozen=True)
class Problem:
    path: str
    line: int | None
    code: str
    message: str
    severity: str = "error"  # "error" blocks publishing; "warning" is shown only

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.severity}: {self.message} [{self.code}]"


@dataclass
class SkillDocument:
    frontmatter: dict
    body: str
    body_line: int
    key_lines: dict[str, int] = field(default_factory=dict)


@dataclass
class ValidationReport:
    problems: list[Problem]
    document: SkillDocument | None = None

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> list[Problem]:
        return [problem for problem in self.problems if problem.severity == "error"]

    @property
    def frontmatter(self) -> dict:
        return self.document.frontmatter if self.document else {}

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "problems": [problem.as_dict() for problem in self.problems],
            "frontmatter": self.frontmatter,
        }


def _yaml_error_line(error: Exception, offset: int) -> int | None:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    return mark.line + 1 + offset if mark is not None else None


def _yaml_error_text(error: Exception) -> str:
    problem = getattr(error, "problem", None)
    context = getattr(error, "context", None)
    text = " ".join(part for part in (context, problem) if part) or str(error).splitlines()[0]
    return text.strip()


def parse_skill_md(text: str, path: str = SKILL_FILE) -> tuple[SkillDocument | None, list[Problem]]:
    """Split frontmatter and body; lines are 1-based lines of the file."""
    problems: list[Problem] = []
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None, [
            Problem(
                path,
                1,
                "frontmatter_missing",
                "SKILL.md must start with a '---' line opening the YAML frontmatter.",
            )
        ]
    closing = next((index for index in range(1, len(lines)) if lines[index].strip() == "---"), None)
    if closing is None:
        return None, [
            Problem(
                path,
                1,
                "frontmatter_unclosed",
                "The frontmatter opened on line 1 is never closed with a '---' line.",
            )
        ]
    yaml_text = "\n".join(lines[1:closing]) + "\n"
    try:
        parsed = strictyaml.load(yaml_text) if yaml_text.strip() else None
    except Exception as error:  # strictyaml and its ruamel scanner raise several types
        return None, [
            Problem(
                path,
                _yaml_error_line(error, 1),
                "frontmatter_yaml",
                f"The frontmatter is not valid YAML: {_yaml_error_text(error)}.",
            )
        ]
    if parsed is None or not isinstance(parsed.data, dict):
        return None, [
            Problem(
                path,
                2,
                "frontmatter_not_mapping",
                "The frontmatter must be a YAML mapping of keys (name, description, …).",
            )
        ]
    key_lines = {str(key): parsed[key].start_line + 1 for key in parsed}
    body = "\n".join(lines[closing + 1 :])
    return SkillDocument(parsed.data, body, closing + 2, key_lines), problems


def _check_name(value, line: int, path: str, folder_name: str | None) -> list[Problem]:
    if not isinstance(value, str) or not value.strip():
        return [Problem(path, line, "name_empty", "'name' must be a non-empty string.")]
    problems = []
    if len(value) > MAX_NAME:
        problems.append(
            Problem(
                path,
                line,
                "name_too_long",
                f"'name' is {len(value)} characters; at most {MAX_NAME}.",
            )
        )
    if not NAME_PATTERN.match(value):
        if value != value.lower():
            why = "it must be lowercase"
        elif value.startswith("-") or value.endswith("-"):
            why = "it cannot start or end with a hyphen"
        elif "--" in value:
            why = "it cannot contain two hyphens in a row"
        else:
            why = "only lowercase letters a-z, digits and hyphens are allowed"
        problems.append(Problem(path, line, "name_format", f"'name' {value!r} is invalid: {why}."))
    if folder_name is not None and folder_name != value:
        problems.append(
            Problem(
                path,
                line,
                "name_folder_mismatch",
                f"'name' {value!r} must equal the skill's folder name {folder_name!r}.",
            )
        )
    return problems


def _check_string(key: str, value, line: int, path: str, limit: int | None) -> list[Problem]:
    code = key.replace("-", "_")
    if not isinstance(value, str) or not value.strip():
        return [Problem(path, line, f"{code}_empty", f"'{key}' must be a non-empty string.")]
    if limit is not None and len(value) > limit:
        return [
            Problem(
                path,
                line,
                f"{code}_too_long",
                f"'{key}' is {len(value)} characters; at most {limit}.",
            )
        ]
    return []


def validate_skill_md(
    text: str, *, path: str = SKILL_FILE, folder_name: str | None = None
) -> ValidationReport:
    document, problems = parse_skill_md(text, path)
    if document is None:
        return ValidationReport(problems)
    meta, lines = document.frontmatter, document.key_lines

    for key in meta:
        if key not in ALLOWED_KEYS:
            hint = (
                " The version is set when publishing to the Hub, not in SKILL.md."
                if key == "version"
                else ""
            )
            problems.append(
                Problem(
                    path,
                    lines.get(key),
                    "unknown_key",
                    f"Unknown frontmatter key '{key}'; allowed: {', '.join(ALLOWED_KEYS)}.{hint}",
                )
            )
    if "name" not in meta:
        problems.append(Problem(path, 2, "name_missing", "The frontmatter needs a 'name'."))
    else:
        problems += _check_name(meta["name"], lines["name"], path, folder_name)
    if "description" not in meta:
        problems.append(
            Problem(
                path,
                2,
                "description_missing",
                "The frontmatter needs a 'description' (what the skill does and when to use it).",
            )
        )
    else:
        problems += _check_string(
            "description", meta["description"], lines["description"], path, MAX_DESCRIPTION
        )
    if "license" in meta:
        problems += _check_string("license", meta["license"], lines["license"], path, None)
    if "compatibility" in meta:
        problems += _check_string(
            "compatibility", meta["compatibility"], lines["compatibility"], path, MAX_COMPATIBILITY
        )
    if "metadata" in meta:
        value = meta["metadata"]
        if not isinstance(value, dict) or any(not isinstance(item, str) for item in value.values()):
            problems.append(
                Problem(
                    path,
                    lines["metadata"],
                    "metadata_not_string_map",
                    "'metadata' must map keys to plain string values.",
                )
            )
    if "allowed-tools" in meta:
        value = meta["allowed-tools"]
        if not (isinstance(value, str) and value.strip()) and not (
            isinstance(value, list) and value and all(isinstance(v, str) for v in value)
        ):
            problems.append(
                Problem(
                    path,
                    lines["allowed-tools"],
                    "allowed_tools_format",
                    "'allowed-tools' must be a space-separated string of tools.",
                )
            )
    if not document.body.strip():
        problems.append(
            Problem(
                path,
                document.body_line,
                "body_empty",
                "SKILL.md has no instructions after the frontmatter.",
                severity="warning",
            )
        )

    problems += _second_opinion(meta, lines, path, problems)
    return ValidationReport(problems, document)


_REFERENCE_FIELDS = (
    ("Unexpected fields", "unknown_key", None),
    ("frontmatter: name", "name", "name"),
    ("'name'", "name", "name"),
    ("Skill name", "name", "name"),
    ("Directory name", "name", "name"),
    ("description", "description", "description"),
    ("Description", "description", "description"),
    ("ompatibility", "compatibility", "compatibility"),
)


def _second_opinion(meta: dict, lines: dict, path: str, found: list[Problem]) -> list[Problem]:
    """skills-ref's verdict; reported only where our own checks found nothing on that field."""
    flagged = {problem.code.split("_")[0] for problem in found} | {
        problem.code for problem in found
    }
    extra = []
    for message in skills_ref_validate(meta, None):
        field_name, key = "other", None
        for needle, name, line_key in _REFERENCE_FIELDS:
            if needle in message:
                field_name, key = name, line_key
                break
        if field_name in flagged:
            continue
        extra.append(Problem(path, lines.get(key) if key else None, "skills_ref", message))
        flagged.add(field_name)
    return extra


def validate_files(files: dict[str, bytes], *, folder_name: str | None = None) -> ValidationReport:
    """Validate a whole skill: SKILL.md at the root, readable as UTF-8, plus layout hints."""
    if SKILL_FILE not in files:
        lower = next((path for path in files if path.lower() == "skill.md"), None)
        message = (
            f"Found '{lower}'; the file must be named exactly 'SKILL.md'."
            if lower
            else "The skill needs a SKILL.md file at its root."
        )
        return ValidationReport([Problem(lower or SKILL_FILE, None, "skill_md_missing", message)])
    try:
        text = files[SKILL_FILE].decode("utf-8")
    except UnicodeDecodeError as error:
        line = files[SKILL_FILE][: error.start].count(b"\n") + 1
        return ValidationReport(
            [Problem(SKILL_FILE, line, "not_utf8", "SKILL.md is not valid UTF-8 text.")]
        )
    report = validate_skill_md(text.removeprefix("\ufeff"), folder_name=folder_name)
    seen: set[str] = set()
    for path in sorted(files):
        top = path.split("/", 1)[0]
        if "/" in path and top not in KNOWN_DIRECTORIES and top not in seen:
            seen.add(top)
            report.problems.append(
                Problem(
                    path,
                    None,
                    "unusual_directory",
                    f"'{top}/' is not one of {', '.join(KNOWN_DIRECTORIES)}; "
                    "agents may not look there.",
                    severity="warning",
                )
            )
    return report
