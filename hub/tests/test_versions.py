"""SemVer parsing and npm-style range resolution."""

from __future__ import annotations

import pytest

from cadre.errors import InvalidInput
from hub.versions import parse_range, parse_version, sort_key

AVAILABLE = [
    "0.1.0",
    "0.1.5",
    "0.2.0",
    "1.0.0",
    "1.2.0",
    "1.2.7",
    "1.3.0-beta.1",
    "1.3.0",
    "1.10.0",
    "2.0.0-rc.1",
    "2.0.0",
    "2.1.3",
]


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("1.0.0", True),
        ("2.0.0-beta.1+build.7", True),
        ("1.0", False),
        ("v1.0.0", False),
        ("01.0.0", False),
        ("1.0.0-", False),
        ("", False),
        ("latest", False),
    ],
)
def test_parse_version(text, valid):
    if valid:
        assert str(parse_version(text)) == text
    else:
        with pytest.raises(InvalidInput) as caught:
            parse_version(text)
        assert caught.value.code == "invalid_version"


@pytest.mark.parametrize(
    ("spec", "best"),
    [
        ("^1.2.0", "1.10.0"),
        ("~1.2", "1.2.7"),
        ("~1.2.0", "1.2.7"),
        (">=1.0 <2", "1.10.0"),
        (">= 1.0.0 < 1.3", "1.2.7"),
        ("1.2.0", "1.2.0"),
        ("=1.2.7", "1.2.7"),
        ("1.x", "1.10.0"),
        ("1", "1.10.0"),
        ("*", "2.1.3"),
        ("", "2.1.3"),
        ("^0.1.0", "0.1.5"),
        ("^0.0.1", None),
        ("1.0 - 1.2", "1.2.7"),
        ("1.0.0 - 1.2.0", "1.2.0"),
        ("<1.0.0 || >=2.1", "2.1.3"),
        ("<1.0.0", "0.2.0"),
        (">2", None),
        ("<=1.2", "1.2.7"),
        ("^1.3.0-beta.1", "1.10.0"),
        ("1.3.0-beta.1", "1.3.0-beta.1"),
        (">=2.0.0-rc.1 <2.0.0", "2.0.0-rc.1"),
        ("^3", None),
    ],
)
def test_range_resolution(spec, best):
    found = parse_range(spec).best(AVAILABLE)
    assert (str(found) if found else None) == best


def test_prereleases_are_skipped_by_plain_ranges():
    assert "1.3.0-beta.1" not in parse_range("^1.0.0")
    assert "2.0.0-rc.1" not in parse_range(">=1.0.0")
    assert "1.3.0-beta.1" in parse_range(">=1.3.0-beta.0")


@pytest.mark.parametrize("spec", ["^x.y", ">>1", "1.2.3.4", "latest", "~>", "a" * 300])
def test_bad_ranges_are_refused(spec):
    with pytest.raises(InvalidInput) as caught:
        parse_range(spec)
    assert caught.value.code == "invalid_range"


def test_sort_key_follows_semver_precedence():
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.10.0",
    ]
    shuffled = list(reversed(ordered))
    assert sorted(shuffled, key=lambda v: sort_key(parse_version(v))) == ordered
