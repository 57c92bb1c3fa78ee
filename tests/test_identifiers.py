"""Identifiers from clients' text: only ASCII digits within bigint are keys."""

from __future__ import annotations

import pytest

from cadre.identifiers import MAX_PK, parse_pk, parse_pks


@pytest.mark.parametrize("value", ["1", "42", 7, str(MAX_PK)])
def test_ascii_digits_within_bigint_are_keys(value):
    assert parse_pk(value) == int(value)


@pytest.mark.parametrize(
    "value",
    [
        "²",
        "١٢",
        "1²",
        "",
        "0",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1.0",
        "1e3",
        "\x00",
        "1\x00",
        "\ud800",
        str(MAX_PK + 1),
        "9" * 400,
        0,
        -3,
        True,
        False,
        1.0,
        None,
        [1],
        {"1": 1},
    ],
)
def test_everything_else_is_not_a_key(value):
    assert parse_pk(value) is None


def test_parse_pks_keeps_the_keys_in_order_once():
    assert parse_pks(["3", "²", 1, "3", "x", 2]) == [3, 1, 2]
    assert parse_pks("123") == []
    assert parse_pks(None) == []
