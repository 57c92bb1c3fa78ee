"""Fixtures for outbound-guard tests: made-up names answering what a test says (the machine has
no DNS, and a name that turns into a metadata address is the attack), and a record of every
socket connection attempted, so a refusal test can say that nothing was sent."""

from __future__ import annotations

import ipaddress
import socket

import pytest


@pytest.fixture
def dns(monkeypatch):
    """`dns["name"] = "address"`: the resolver answers it; other names resolve normally."""
    answers: dict[str, str] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        host = host.decode() if isinstance(host, bytes) else host
        if host in answers:
            address = answers[host]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


@pytest.fixture
def connections(monkeypatch):
    """Every TCP connection attempted, as (host, port). Loopback ones go ahead (the fakes live
    there); any other is recorded and fails at once, so a test never waits on, or reaches, an
    outside address — and one the guard should have refused shows up here."""
    attempted: list[tuple[str, int]] = []
    real = socket.create_connection

    def create_connection(address, *args, **kwargs):
        host, port = address[0], address[1]
        attempted.append((host, port))
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            raise ConnectionRefusedError(f"the test does not connect to {host}")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", create_connection)
    return attempted


def reached(attempted: list[tuple[str, int]], *hosts: str) -> list[tuple[str, int]]:
    """The attempted connections to any of `hosts` (names or addresses)."""
    return [(host, port) for host, port in attempted if host in hosts]
