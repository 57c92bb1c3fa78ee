"""Shared pieces of the REST API: error envelope, pagination, permissions, base viewsets."""
