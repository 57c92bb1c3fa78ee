"""Memory REST API under /api/v1/: memories, memory-tasks and memory-context-records (routes in
`urls.py`).

Memory is not scoped by an organization-wide permission like other resources: what a caller
may read is the set of scopes computed from its identity (selectors.readable_scope_keys), so
these viewsets replace TenantViewSet's queryset and permission checks with the selectors'
(`viewsets.MemoryScopedViewSet`).
"""
