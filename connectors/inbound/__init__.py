"""Inbound stage: the HTTP edge and long connections store each platform event once; the worker
claims, resolves the sender, starts the run and replies (store → drain → dispatch)."""
