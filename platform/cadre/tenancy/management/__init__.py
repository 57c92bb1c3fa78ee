"""Tenancy management commands."""
