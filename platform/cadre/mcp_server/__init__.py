"""Cadre as an MCP server for outside agents (memory, skills, confirmations, templates)."""
