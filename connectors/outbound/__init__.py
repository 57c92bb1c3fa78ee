"""Outbound stage: send once per idempotency key, deliver run replies and agent messages, and
send governance alerts over IM."""
