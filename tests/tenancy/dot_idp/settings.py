"""Settings of the django-oauth-toolkit identity provider the SSO tests run as a subprocess.

Everything comes from the environment the test fixture sets: DOT_IDP_DIR (its SQLite database
and its RSA keys: active.pem signs, inactive-*.pem are still published in the JWKS),
DOT_IDP_ISSUER (http://127.0.0.1:<port>/o) and DOT_IDP_ADMIN_TOKEN (its user-admin API)."""

from __future__ import annotations

import os
from pathlib import Path

STATE = Path(os.environ["DOT_IDP_DIR"])
ISSUER = os.environ["DOT_IDP_ISSUER"]
ADMIN_TOKEN = os.environ["DOT_IDP_ADMIN_TOKEN"]

SECRET_KEY = os.environ.get("DOT_IDP_SECRET_KEY", "dot-idp-test-only-" + ADMIN_TOKEN)
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
ROOT_URLCONF = "tests.tenancy.dot_idp.urls"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.staticfiles",
    "oauth2_provider",
    "tests.tenancy.dot_idp",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ]
        },
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": STATE / "idp.sqlite3"}}
STATIC_URL = "/static/"
LOGIN_URL = "/accounts/login/"
# Cookies ignore ports: on 127.0.0.1 beside Cadre's live server, the provider's cookies need
# names of their own (a real provider is on a host of its own).
SESSION_COOKIE_NAME = "idp_sessionid"
CSRF_COOKIE_NAME = "idp_csrftoken"
# Fast hashing: the users' passwords are test values.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}

_inactive = sorted(STATE.glob("inactive-*.pem"))
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": (STATE / "active.pem").read_text(),
    "OIDC_RSA_PRIVATE_KEYS_INACTIVE": [path.read_text() for path in _inactive],
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "PKCE_REQUIRED": True,
    "OAUTH2_VALIDATOR_CLASS": "tests.tenancy.dot_idp.claims.ClaimsValidator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "E-mail address",
        "profile": "Name and employee number",
        "groups": "Group memberships",
    },
}
