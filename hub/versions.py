"""Semantic versions and npm-style ranges (`^1.2.0`, `~1.2`, `>=1.0 <2`, `1.x`, `1 - 2`, pins).

Versions are strict SemVer 2.0 (parsed by the `semver` package); ranges follow npm's grammar:
comparator sets joined by `||`, comparators separated by spaces, hyphen ranges, `x`/`*`
wildcards, partial versions, caret and tilde. As in npm, a prerelease version only satisfies a
range when one of its comparators names a prerelease of the same major.minor.patch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import semver
from django.utils.translation import gettext as _

from cadre.errors import InvalidInput

Version = semver.Version

_PARTIAL = re.compile(
    r"^v?(?P<major>0|[1-9]\d*|[xX*])"
    r"(?:\.(?P<minor>0|[1-9]\d*|[xX*])"
    r"(?:\.(?P<patch>0|[1-9]\d*|[xX*])"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?)?)?$"
)
_COMPARATOR = re.compile(r"^(?P<op><=|>=|<|>|=|\^|~>?|)\s*(?P<version>\S+)$")
_HYPHEN = re.compile(r"^\s*(\S+)\s+-\s+(\S+)\s*$")
MAX_RANGE_LENGTH = 256


def parse_version(text: str) -> Version:
    """A strict SemVer 2.0 version; `InvalidInput` names what is wrong."""
    value = (text or "").strip()
    if len(value) > 128:
        raise InvalidInput(_("A version is at most 128 characters."), code="invalid_version")
    try:
        return Version.parse(value)
    except (ValueError, TypeError):
        raise InvalidInput(
            _(
                "'%(value)s' is not a semantic version "
                "(MAJOR.MINOR.PATCH, e.g. 1.4.0 or 2.0.0-beta.1)."
            )
            % {"value": value},
            code="invalid_version",
        ) from None


def is_version(text: str) -> bool:
    try:
        parse_version(text)
    except InvalidInput:
        return False
    return True


@dataclass(frozen=True)
class Comparator:
    op: str  # one of < <= > >= =
    version: Version

    def test(self, version: Version) -> bool:
        order = version.compare(self.version)
        return {
            "<": order < 0,
            "<=": order <= 0,
            ">": order > 0,
            ">=": order >= 0,
            "=": order == 0,
        }[self.op]


@dataclass(frozen=True)
class VersionRange:
    """Alternatives (`||`) of comparator sets; an empty set matches everything."""

    text: str
    alternatives: tuple[tuple[Comparator, ...], ...]

    def __contains__(self, version: Version | str) -> bool:
        if isinstance(version, str):
            version = parse_version(version)
        return any(_set_matches(comparators, version) for comparators in self.alternatives)

    def best(self, versions: Iterable[Version | str]) -> Version | None:
        """The highest of `versions` inside the range."""
        parsed = [parse_version(v) if isinstance(v, str) else v for v in versions]
        matching = [version for version in parsed if version in self]
        return max(matching) if matching else None


def _set_matches(comparators: tuple[Comparator, ...], version: Version) -> bool:
    if not all(comparator.test(version) for comparator in comparators):
        return False
    if version.prerelease is None:
        return True
    # npm: a prerelease only matches when a comparator names one on the same patch tuple.
    tuple_ = (version.major, version.minor, version.patch)
    return any(
        comparator.version.prerelease is not None
        and (comparator.version.major, comparator.version.minor, comparator.version.patch) == tuple_
        for comparator in comparators
    )


def _bad_range(text: str, why: str) -> InvalidInput:
    return InvalidInput(
        _("'%(text)s' is not a version range: %(why)s.") % {"text": text, "why": why},
        code="invalid_range",
    )


def _partial(text: str, whole: str):
    match = _PARTIAL.match(text)
    if match is None:
        raise _bad_range(whole, _("'%(text)s' is not a version") % {"text": text})
    parts = []
    for name in ("major", "minor", "patch"):
        value = match.group(name)
        parts.append(None if value is None or value in "xX*" else int(value))
    # A wildcard swallows what follows it: 1.x.3 means 1.x.
    for index, value in enumerate(parts):
        if value is None:
            parts[index + 1 :] = [None] * (2 - index)
            break
    return parts[0], parts[1], parts[2], match.group("pre")


def _v(major: int, minor: int = 0, patch: int = 0, pre: str | None = None) -> Version:
    return Version(major, minor, patch, prerelease=pre)


def _lowest(major: int, minor: int = 0, patch: int = 0) -> Version:
    """The lowest version of a tuple including its prereleases (npm's `-0`)."""
    return Version(major, minor, patch, prerelease="0")


def _expand(op: str, text: str, whole: str) -> list[Comparator]:
    major, minor, patch, pre = _partial(text, whole)
    if major is None:  # *, x
        return (
            []
            if op in ("", "=", ">=", "<=", "^", "~", "~>")
            else [Comparator("<", _v(0, 0, 0, "0"))]
        )
    if op in ("", "="):
        if minor is None:
            return [Comparator(">=", _v(major)), Comparator("<", _lowest(major + 1))]
        if patch is None:
            return [Comparator(">=", _v(major, minor)), Comparator("<", _lowest(major, minor + 1))]
        return [Comparator("=", _v(major, minor, patch, pre))]
    if op in ("~", "~>"):
        if minor is None:
            return [Comparator(">=", _v(major)), Comparator("<", _lowest(major + 1))]
        return [
            Comparator(">=", _v(major, minor, patch or 0, pre)),
            Comparator("<", _lowest(major, minor + 1)),
        ]
    if op == "^":
        low = Comparator(">=", _v(major, minor or 0, patch or 0, pre))
        if major > 0 or minor is None:
            return [low, Comparator("<", _lowest(major + 1))]
        if minor > 0 or patch is None:
            return [low, Comparator("<", _lowest(0, minor + 1))]
        return [low, Comparator("<", _lowest(0, 0, patch + 1))]
    if op == ">":
        if minor is None:
            return [Comparator(">=", _lowest(major + 1))]
        if patch is None:
            return [Comparator(">=", _lowest(major, minor + 1))]
        return [Comparator(">", _v(major, minor, patch, pre))]
    if op == ">=":
        return [Comparator(">=", _v(major, minor or 0, patch or 0, pre))]
    if op == "<":
        if patch is not None:
            return [Comparator("<", _v(major, minor, patch, pre))]
        return [Comparator("<", _lowest(major, minor or 0))]
    if op == "<=":
        if minor is None:
            return [Comparator("<", _lowest(major + 1))]
        if patch is None:
            return [Comparator("<", _lowest(major, minor + 1))]
        return [Comparator("<=", _v(major, minor, patch, pre))]
    raise _bad_range(whole, _("unknown operator '%(op)s'") % {"op": op})


def _comparator_set(text: str, whole: str) -> tuple[Comparator, ...]:
    hyphen = _HYPHEN.match(text)
    if hyphen:
        low, high = hyphen.groups()
        comparators = _expand(">=", low, whole)
        h_major, h_minor, h_patch, h_pre = _partial(high, whole)
        if h_major is None:
            return tuple(comparators)
        if h_minor is None or h_patch is None:
            comparators += _expand("<=", high, whole)
        else:
            comparators.append(Comparator("<=", _v(h_major, h_minor, h_patch, h_pre)))
        return tuple(comparators)
    # Join operators separated from their version by spaces: ">= 1.0" → ">=1.0".
    tokens = re.sub(r"(<=|>=|<|>|=|\^|~>?)\s+", r"\1", text.strip()).split()
    comparators: list[Comparator] = []
    for token in tokens:
        match = _COMPARATOR.match(token)
        if match is None:
            raise _bad_range(whole, _("cannot read '%(token)s'") % {"token": token})
        comparators.extend(_expand(match.group("op"), match.group("version"), whole))
    return tuple(comparators)


def parse_range(text: str) -> VersionRange:
    """An npm-style range. `latest`-style dist-tags are not ranges: resolve them first."""
    value = (text or "").strip()
    if len(value) > MAX_RANGE_LENGTH:
        raise _bad_range(
            value[:40] + "…",
            _("longer than %(limit)s characters") % {"limit": MAX_RANGE_LENGTH},
        )
    if value == "":
        value = "*"
    alternatives = tuple(_comparator_set(part, value) for part in value.split("||"))
    return VersionRange(text=value, alternatives=alternatives)


def is_range(text: str) -> bool:
    try:
        parse_range(text)
    except InvalidInput:
        return False
    return True


def sort_key(version: Version) -> tuple:
    """A key ordering versions by SemVer precedence (usable with sorted())."""
    return (
        version.major,
        version.minor,
        version.patch,
        version.prerelease is None,
        _pre_key(version),
    )


def _pre_key(version: Version) -> tuple:
    if version.prerelease is None:
        return ()
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in version.prerelease.split(".")
    )
