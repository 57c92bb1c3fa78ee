"""A separate OpenID Connect identity provider for the SSO tests: django-oauth-toolkit's provider
in its own tiny Django project, run as its own process (tests/tenancy/dot_provider.py)."""
