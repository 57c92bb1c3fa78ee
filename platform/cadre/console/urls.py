"""Console routes (the URL names are used across the templates and by other apps)."""

from __future__ import annotations

from django.urls import path

from cadre.console.views import (
    account,
    agents,
    api_keys,
    audit,
    chart,
    connectors,
    governance,
    home,
    hub,
    identity_providers,
    mcp_servers,
    members,
    memory,
    memory_viewer,
    model_providers,
    organization,
    skill_reviews,
    sso,
    usage,
)

app_name = "console"

urlpatterns = [
    path("login/", account.ConsoleLoginView.as_view(), name="login"),
    path("logout/", account.ConsoleLogoutView.as_view(), name="logout"),
    path("invite/<str:token>/", account.invitation_accept, name="invite"),
    path("sso/<slug:org_slug>/<slug:provider_slug>/", sso.sso_start, name="sso_start"),
    path(
        "sso/<slug:org_slug>/<slug:provider_slug>/callback/",
        sso.sso_callback,
        name="sso_callback",
    ),
    path(
        "sso/<slug:org_slug>/<slug:provider_slug>/saml/metadata/",
        sso.saml_metadata,
        name="saml_metadata",
    ),
    path("sso/<slug:org_slug>/<slug:provider_slug>/saml/acs/", sso.saml_acs, name="saml_acs"),
    path("sso/<slug:org_slug>/<slug:provider_slug>/saml/slo/", sso.saml_slo, name="saml_slo"),
    path(
        "sso/<slug:org_slug>/<slug:provider_slug>/backchannel-logout/",
        sso.oidc_backchannel_logout,
        name="oidc_backchannel_logout",
    ),
    path("", home.home, name="home"),
    path("organizations/switch/", home.switch_organization, name="switch_organization"),
    # members
    path("members/", members.member_list, name="members"),
    path("members/new/", members.member_create, name="member_create"),
    path("members/invite/", members.member_invite, name="member_invite"),
    path("members/<int:pk>/", members.member_detail, name="member"),
    path("members/<int:pk>/edit/", members.member_edit, name="member_edit"),
    path("members/<int:pk>/invite/", members.member_reinvite, name="member_reinvite"),
    path(
        "members/<int:pk>/invitation/revoke/",
        members.invitation_revoke,
        name="invitation_revoke",
    ),
    path("members/<int:pk>/deactivate/", members.member_deactivate, name="member_deactivate"),
    path("members/<int:pk>/reactivate/", members.member_reactivate, name="member_reactivate"),
    path("members/<int:pk>/unlock/", members.member_signin_unlock, name="member_signin_unlock"),
    path("members/<int:pk>/identities/", members.identity_add, name="identity_add"),
    path(
        "members/<int:pk>/identities/<int:identity_pk>/remove/",
        members.identity_remove,
        name="identity_remove",
    ),
    # departments and positions
    path("departments/", chart.department_list, name="departments"),
    path("departments/new/", chart.department_create, name="department_create"),
    path("departments/<int:pk>/", chart.department_detail, name="department"),
    path("departments/<int:pk>/edit/", chart.department_edit, name="department_edit"),
    path("departments/<int:pk>/archive/", chart.department_archive, name="department_archive"),
    path("departments/<int:pk>/restore/", chart.department_restore, name="department_restore"),
    path("positions/", chart.position_list, name="positions"),
    path("positions/new/", chart.position_create, name="position_create"),
    path("positions/<int:pk>/edit/", chart.position_edit, name="position_edit"),
    path("positions/<int:pk>/archive/", chart.position_archive, name="position_archive"),
    path("positions/<int:pk>/restore/", chart.position_restore, name="position_restore"),
    # governance and settings
    path("audit/", audit.audit_list, name="audit"),
    path("audit/<int:pk>/", audit.audit_detail, name="audit_event"),
    # usage and budgets
    path("usage/", usage.usage_page, name="usage"),
    path("usage/export/", usage.usage_export, name="usage_export"),
    path("usage/budgets/new/", usage.budget_create, name="budget_create"),
    path("usage/budgets/<int:pk>/", usage.budget_edit, name="budget_edit"),
    path("usage/budgets/<int:pk>/delete/", usage.budget_delete, name="budget_delete"),
    path("api-keys/", api_keys.api_key_list, name="api_keys"),
    path("api-keys/new/", api_keys.api_key_create, name="api_key_create"),
    path("api-keys/<int:pk>/revoke/", api_keys.api_key_revoke, name="api_key_revoke"),
    path("organization/", organization.organization_detail, name="organization"),
    path(
        "organization/scim-tokens/new/",
        organization.scim_token_create,
        name="scim_token_create",
    ),
    path(
        "organization/scim-tokens/<int:pk>/revoke/",
        organization.scim_token_revoke,
        name="scim_token_revoke",
    ),
    path(
        "identity-providers/",
        identity_providers.identity_providers,
        name="identity_providers",
    ),
    path(
        "identity-providers/new/",
        identity_providers.identity_provider_edit,
        name="identity_provider_new",
    ),
    path(
        "identity-providers/<int:pk>/",
        identity_providers.identity_provider_edit,
        name="identity_provider_edit",
    ),
    path(
        "identity-providers/<int:pk>/test/",
        identity_providers.identity_provider_test,
        name="identity_provider_test",
    ),
    path("memory/", memory.memory_list, name="memory"),
    path("memory/search/", memory.memory_search, name="memory_search"),
    path("memory/timeline/", memory_viewer.memory_timeline, name="memory_timeline"),
    path("memory/map/", memory_viewer.memory_map, name="memory_map"),
    path("memory/heatmap/", memory_viewer.memory_heatmap, name="memory_heatmap"),
    path("memory/quality/", memory_viewer.memory_quality, name="memory_quality"),
    path("memory/<int:pk>/", memory.memory_detail, name="memory_detail"),
    path("memory/<int:pk>/correct/", memory.memory_correct, name="memory_correct"),
    path("memory/<int:pk>/delete/", memory.memory_delete, name="memory_delete"),
    # each area's pages live in its own module and list their own routes
    *agents.urlpatterns,
    *governance.urlpatterns,
    *connectors.urlpatterns,
    *hub.urlpatterns,
    *model_providers.urlpatterns,
    *mcp_servers.urlpatterns,
    *skill_reviews.urlpatterns,
]
