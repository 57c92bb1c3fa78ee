"""The authorization matrix: every route of the URLconf, per method, with who may call it.

tests/authorization/test_matrix.py walks the URL resolver and fails on a route with no row here
(and on a row naming no route), then sends each declared (route, method) once as every
principal and checks the outcome the rule implies. A new route is covered by the time it
exists: its author writes its row.

A row is `route  methods  rule  object`:

- route: the URL name (`console:` names keep their namespace), or the route itself for an
  unnamed pattern (`scim/v2/Users/<str:pk>`).
- methods: comma-separated; the route must dispatch them (checked for class-based views).
- rule, from a small vocabulary:
    public        no authentication at all: health, sign-in, schema, SSO entry points. Anyone;
                  it may refuse by its own protocol (400/403/404), never answer a 5xx.
    signed        authenticates by a signature of its own (webhooks): every principal, whose
                  request carries no signature, is refused.
    nobody        answers no one (unknown API paths): refused for every principal.
    member        any member of the organization (of any role) on the route's surface.
    perm:P        needs permission P (cadre.tenancy.roles); `perm:P|Q` needs either. An API
                  key holds its creator's permissions capped by its scopes.
    personal      another member's personal data (their `user:` memory, their transcripts,
                  cases made from them): its subject, the agent's owner and holders of
                  `memory.personal`; everyone else gets 404, never 403.
    personal:P    the same data reached through a tool that needs P (a case saved from a
                  person's turn, in evaluation: an admin's tool): holders of `memory.personal`
                  and P; the subject without P is refused; everyone else gets 404.
    subject       the subject's own (chatting in their own session): everyone else gets 404.
    own:P         the subject's own, or anyone holding P (a deployment manager cancels any
                  run); everyone else is refused.
    compat:read   the Mem0/MemOS APIs: an API key with a memory scope; no session.
    compat:write  the same, with `memory:write` (the matrix's keys carry every scope; scope
                  refusals are tests/memory's).
    scim          a SCIM bearer token of the organization, nothing else.
- object: which object of organization A the URL names (`-` for none; `auto` for an API
  route whose viewset's model has a factory in tests/api/tenant_objects.py; otherwise a key of
  OBJECTS in test_matrix.py). The same route may appear again with another object (a shared
  memory and a personal one).

Surfaces decide which credential counts: console pages take a session, /api/ a session or an
API key, /mem0/ and /memos/ an API key, /scim/v2/ a SCIM token.
"""

from __future__ import annotations

from dataclasses import dataclass

RULE_WORDS = (
    "public",
    "signed",
    "nobody",
    "member",
    "perm",
    "personal",
    "subject",
    "own",
    "compat:read",
    "compat:write",
    "scim",
)

# fmt: off
MATRIX = """
# --- the instance --------------------------------------------------------------------------
healthz                              GET              public                     -
readyz                               GET              public                     -
favicon.ico                          GET,POST,PUT,PATCH,DELETE public                     -
schema                               GET              public                     -
api-docs                             GET              public                     -
clawhub-well-known                   GET              public                     -
api/                                 GET,POST         nobody                     -
api/<path:rest>                      GET,POST         nobody                     unknown_path

# --- /api/v1/: tenancy -------------------------------------------------------------------------
organization                         GET              perm:organization.view     -
organization                         PATCH            perm:organization.manage   -
department-list                      GET              perm:department.view       -
department-list                      POST             perm:department.manage     -
department-detail                    GET              perm:department.view       auto
department-detail                    PUT,PATCH,DELETE perm:department.manage     auto
position-list                        GET              perm:position.view         -
position-list                        POST             perm:position.manage       -
position-detail                      GET              perm:position.view         auto
position-detail                      PUT,PATCH,DELETE perm:position.manage       auto
member-list                          GET              perm:member.view           -
member-list                          POST             perm:member.manage         -
member-invite                        POST             perm:member.manage         -
member-detail                        GET              perm:member.view           auto
member-detail                        PUT,PATCH        perm:member.manage         auto
member-deactivate                    POST             perm:member.manage         auto
member-reactivate                    POST             perm:member.manage         auto
member-sign-in-lock                  GET              perm:member.manage         auto
member-sign-in-unlock                POST             perm:member.manage         auto
member-sso-link-allow                POST             perm:member.manage         auto
invitation-list                      GET              perm:member.view           -
invitation-detail                    GET              perm:member.view           auto
invitation-revoke                    POST             perm:member.manage         auto
im-identity-list                     GET              perm:member.view           -
im-identity-list                     POST             perm:member.manage         -
im-identity-detail                   GET              perm:member.view           auto
im-identity-detail                   DELETE           perm:member.manage         auto
api-key-list                         GET              perm:apikey.view           -
api-key-list                         POST             perm:apikey.manage         -
api-key-detail                       GET              perm:apikey.view           auto
api-key-detail                       DELETE           perm:apikey.manage         auto
role-list                            GET              member                     -
grant-list                           GET              perm:grant.manage|audit.view -
grant-list                           POST             perm:grant.manage          -
grant-detail                         GET              perm:grant.manage|audit.view auto
grant-detail                         DELETE           perm:grant.manage          auto

# --- /api/v1/: governance ----------------------------------------------------------------------
policy-plugins                       GET              perm:policy.manage         -
audit-public-key                     GET              public                     -
audit-event-list                     GET              perm:audit.view            -
audit-event-detail                   GET              perm:audit.view            auto
audit-export-list                    GET,POST         perm:audit.export          -
audit-export-detail                  GET              perm:audit.export          auto
audit-export-download                GET              perm:audit.export          auto
policy-chain-list                    GET              perm:policy.manage         -
policy-chain-current                 GET,PUT          perm:policy.manage         -
policy-chain-detail                  GET              perm:policy.manage         auto
confirmation-list                    GET              member                     -
confirmation-detail                  GET              perm:confirmation.decide|audit.view auto
# approve/reject: the factory's confirmation is routed to the owner; no one else decides it
confirmation-approve                 POST             perm:organization.manage   auto
confirmation-reject                  POST             perm:organization.manage   auto
confirmation-cancel                  POST             perm:confirmation.decide   auto
alert-rule-list                      GET,POST         perm:policy.manage         -
alert-rule-detail                    GET              perm:policy.manage         auto
alert-list                           GET              perm:audit.view            -
alert-detail                         GET              perm:audit.view            auto
alert-acknowledge                    POST             perm:policy.manage         auto
alert-resolve                        POST             perm:policy.manage         auto
budget-list                          GET              perm:budget.view           -
budget-list                          POST             perm:budget.manage         -
budget-detail                        GET              perm:budget.view           auto
budget-detail                        PATCH,DELETE     perm:budget.manage         auto
usage-list                           GET              perm:budget.view           -
usage-export                         GET              perm:budget.view           -
usage-summary                        GET              perm:budget.view           -
masking-preview                      POST             perm:policy.manage|audit.view -
masking-rule-list                    GET,POST         perm:policy.manage         -
masking-rule-detail                  GET,PUT,PATCH,DELETE perm:policy.manage         auto

# --- /api/v1/: memory --------------------------------------------------------------------------
embedding-model-list                 GET              perm:model.manage          -
embedding-model-activate             POST             perm:model.manage          -
memory-list                          GET              member                     -
memory-list                          POST             member                     -
memory-delete-by-filter              POST             member                     -
memory-feedback                      POST             member                     -
memory-scopes                        GET              member                     -
memory-access-log                    GET              member                     -
memory-search                        POST             member                     -
memory-stats                         GET              perm:memory.view           -
memory-detail                        GET              member                     auto
memory-detail                        PATCH,DELETE     perm:memory.manage         auto
memory-context-records               GET              member                     auto
memory-deletion                      GET              perm:memory.view           auto
memory-history                       GET              member                     auto
memory-purge                         POST             perm:memory.manage         auto
memory-trail                         GET              member                     auto
memory-accept                        POST             perm:memory.manage         auto
memory-reject                        POST             perm:memory.manage         auto
memory-detail                        GET,PATCH,DELETE personal                   personal_memory
memory-context-records               GET              personal                   personal_memory
memory-deletion                      GET              personal                   personal_memory
memory-history                       GET              personal                   personal_memory
memory-purge                         POST             personal                   personal_memory
memory-trail                         GET              personal                   personal_memory
memory-viewer-heatmap                GET              member                     -
memory-viewer-quality                GET              member                     -
memory-viewer-timeline               GET              member                     -
memory-viewer-vector-map             GET              member                     -
memory-task-list                     GET              member                     -
memory-task-detail                   GET              perm:memory.view           auto
memory-context-record-list           GET              member                     -
memory-context-record-detail         GET              perm:memory.view           auto
memory-context-record-detail         GET              personal                   personal_context

# --- /api/v1/: agents --------------------------------------------------------------------------
template-presets                     GET              perm:template.view         -
trigger-inbound                      POST             signed                     trigger_inbound
agent-template-list                  GET              perm:template.view         -
agent-template-list                  POST             perm:template.manage       -
agent-template-detail                GET              perm:template.view         auto
agent-template-diff                  GET              perm:template.view         auto
agent-template-draft                 POST             perm:template.manage       auto
agent-template-generate              POST             perm:template.manage       auto
agent-template-policy-chain          GET              perm:policy.manage         auto
agent-template-policy-chain          PUT              perm:policy.manage         auto
template-version-list                GET              perm:template.view         -
template-version-detail              GET              perm:template.view         auto
template-version-detail              PATCH            perm:template.manage       auto
template-version-publish             POST             perm:template.manage       auto
template-version-submit              POST             perm:template.manage       auto
template-version-withdraw            POST             perm:template.manage       auto
model-provider-list                  GET              perm:template.view         -
model-provider-list                  POST             perm:model.manage          -
model-provider-detail                GET              perm:template.view         auto
model-provider-detail                DELETE           perm:model.manage          auto
model-provider-connection-test       POST             perm:model.manage          auto
model-provider-make-default          POST             perm:model.manage          auto
model-provider-prices                PUT              perm:model.manage          auto
mcp-server-list                      GET,POST         perm:connector.manage      -
mcp-server-detail                    GET,PATCH        perm:connector.manage      auto
mcp-server-discover                  POST             perm:connector.manage      auto
mcp-server-restore                   POST             perm:connector.manage      auto
mcp-server-revoke                    POST             perm:connector.manage      auto
mcp-server-tool-risks                PUT              perm:connector.manage      auto
deployment-list                      GET              perm:deployment.manage|agent.view -
deployment-list                      POST             perm:deployment.manage     -
deployment-detail                    GET              perm:deployment.manage|agent.view auto
deployment-rollout                   POST             perm:deployment.manage     auto
deployment-stop                      POST             perm:deployment.manage     auto
deployment-sync                      POST             perm:deployment.manage     auto
rollout-list                         GET              perm:deployment.manage|agent.view -
rollout-detail                       GET              perm:deployment.manage|agent.view auto
rollout-advance                      POST             perm:deployment.manage     auto
rollout-rollback                     POST             perm:deployment.manage     auto
agent-list                           GET              perm:agent.view|chat.use   -
agent-detail                         GET              own:agent.view             subject_agent
agent-detail                         PATCH            own:deployment.manage      subject_agent
session-list                         GET              perm:agent.view|chat.use   -
session-detail                       GET              personal                   subject_session
run-list                             GET              perm:agent.view|chat.use   -
run-list                             POST             perm:chat.use              -
run-usage                            GET              perm:agent.view|chat.use   -
run-detail                           GET              personal                   subject_run
run-call-chain                       GET              personal                   subject_run
run-events                           GET              personal                   subject_run
# the run's own member, or a deployment manager
run-cancel                           POST             own:deployment.manage      subject_run
run-rating                           POST             own:deployment.manage      subject_run
run-resume                           POST             perm:confirmation.decide   subject_run
event-trigger-list                   GET              perm:deployment.manage|agent.view -
event-trigger-list                   POST             perm:deployment.manage     -
event-trigger-detail                 GET              perm:deployment.manage|agent.view auto
agent-subscription-list              GET              member                     -
# a member subscribes an agent of their own (pending until the publisher's side approves)
agent-subscription-list              POST             own:deployment.manage      -
agent-subscription-detail            GET              perm:deployment.manage|agent.view auto
agent-subscription-detail            DELETE           perm:deployment.manage     auto
agent-subscription-approve           POST             perm:deployment.manage     auto
agent-subscription-pause             POST             perm:deployment.manage     auto
agent-subscription-resume            POST             perm:deployment.manage     auto

# --- /api/v1/evaluation/: an admin's tool --------------------------------------------------------
evaluation-gates                     GET              perm:evaluation.view       -
evaluation-gates                     PUT              perm:organization.manage   -
eval-suite-list                      GET              perm:evaluation.view       -
eval-suite-list                      POST             perm:evaluation.manage     -
eval-suite-detail                    GET              perm:evaluation.view       auto
eval-suite-detail                    PATCH,DELETE     perm:evaluation.manage     auto
eval-case-list                       GET              perm:evaluation.view       -
eval-case-list                       POST             perm:evaluation.manage     -
eval-case-from-turn                  POST             perm:evaluation.manage     -
eval-case-import                     POST             perm:evaluation.manage     -
eval-case-detail                     GET              perm:evaluation.view       auto
eval-case-detail                     DELETE           perm:evaluation.manage     auto
eval-case-detail                     GET              personal:evaluation.view   turn_case
eval-run-list                        GET              perm:evaluation.view       -
eval-run-list                        POST             perm:evaluation.manage     -
eval-run-detail                      GET              perm:evaluation.view       auto
eval-run-results                     GET              perm:evaluation.view       auto

# --- /api/v1/: connectors ----------------------------------------------------------------------
connector-list                       GET,POST         perm:connector.manage      -
connector-detail                     GET,PUT,PATCH    perm:connector.manage      auto
connector-rotate-credentials         POST             perm:connector.manage      auto
connector-binding-list               GET,POST         perm:connector.manage      -
connector-binding-detail             GET,DELETE       perm:connector.manage      auto
unmapped-identity-list               GET              perm:connector.manage      -
unmapped-identity-detail             GET              perm:connector.manage      auto
directory-sync-list                  GET,POST         perm:connector.manage      -
directory-sync-detail                GET              perm:connector.manage      auto
directory-conflict-list              GET              perm:connector.manage      -
directory-conflict-detail            GET              perm:connector.manage      auto
directory-conflict-resolve           POST             perm:connector.manage      auto

# --- /api/v1/hub/ and the ClawHub-compatible routes --------------------------------------------
hub-skills                           GET              perm:skill.view            -
hub-publish                          POST             perm:skill.publish         -
hub-search                           GET              perm:skill.view            -
hub-signing-key                      GET              perm:skill.view            -
hub-namespaces                       POST             perm:skill.review|organization.manage -
hub-skill                            GET              perm:skill.view            auto
hub-skill                            PATCH            perm:skill.review          auto
hub-skill-deprecate                  POST             perm:skill.review          auto
hub-skill-download                   GET              perm:skill.view            auto
hub-skill-tag                        PUT,DELETE       perm:skill.review          auto
hub-skill-templates                  GET              perm:skill.view            auto
hub-skill-templates                  POST             perm:template.manage       auto
hub-versions                         GET              perm:skill.view            auto
hub-version                          GET              perm:skill.view            auto
hub-version-review                   POST             perm:skill.review          auto
hub-version-yank                     POST             perm:skill.review          auto
hub-version-unyank                   POST             perm:skill.review          auto
hub-version-file                     GET              perm:skill.view            auto
hub-installs                         GET              perm:skill.view            -
hub-install                          GET              perm:agent.view            auto
hub-install-apply                    POST             perm:deployment.manage     auto
hub-install-rollback                 POST             perm:deployment.manage     auto
hub-run-skills                       GET              personal                   subject_run
hub-run-feedback                     POST             own:deployment.manage      subject_run
clawhub-upload                       POST             perm:skill.publish         auto
clawhub-whoami                       GET              member                     -
clawhub-search                       GET              perm:skill.view            -
clawhub-resolve                      GET              perm:skill.view            -
clawhub-download                     GET              perm:skill.view            -
clawhub-skills                       GET              perm:skill.view            -
clawhub-skills                       POST             perm:skill.publish         -
clawhub-upload-url                   POST             perm:skill.publish         -
clawhub-skill                        GET              perm:skill.view            auto
clawhub-versions                     GET              perm:skill.view            auto
clawhub-version                      GET              perm:skill.view            auto
clawhub-file                         GET              perm:skill.view            auto
clawhub-moderation                   GET              perm:skill.view            auto
clawhub-tag                          POST             perm:skill.publish         auto

# --- /api/v1/skills/ -----------------------------------------------------------------------------
skill-stages                         GET              perm:skill.review          -
skill-stages                         PUT              perm:policy.manage         -
skill-candidate-list                 GET              perm:skill.view            -
skill-candidate-list                 POST             perm:skill.publish         -
skill-candidate-detail               GET              perm:skill.review          auto
skill-candidate-decisions            POST             perm:skill.review          auto
skill-candidate-edit                 POST             perm:skill.review          auto
skill-candidate-resubmit             POST             perm:skill.review          auto
skill-proposal-list                  GET              perm:chat.use              -
skill-proposal-detail                GET              subject                    subject_proposal
skill-proposal-confirm               POST             subject                    subject_proposal
skill-proposal-dismiss               POST             subject                    subject_proposal
skill-distillation-list              GET              perm:skill.review          -

# --- IM platforms' callbacks ---------------------------------------------------------------------
connectors-inbound                   GET,POST         signed                     connector_inbound

# --- /mem0/ and /memos/: memory APIs other clients speak -----------------------------------------
mem0-schema                          GET              public                     -
mem0-ping                            GET              compat:read                -
mem0-memories                        GET              compat:read                -
mem0-memories                        POST,DELETE      compat:write               -
mem0-add                             POST             compat:write               -
mem0-list-v3                         POST             compat:read                -
mem0-list-v2                         POST             compat:read                -
mem0-search-v3                       POST             compat:read                -
mem0-search-v2                       POST             compat:read                -
mem0-search-v1                       POST             compat:read                -
mem0-memory                          GET              compat:read                shared_memory_id
mem0-memory                          PUT,DELETE       perm:memory.manage         shared_memory_id
mem0-memory-history                  GET              compat:read                shared_memory_id
mem0-memory                          GET,PUT,DELETE   personal                   personal_memory_id
mem0-memory-history                  GET              personal                   personal_memory_id
mem0-feedback                        POST             compat:write               -
mem0-entities                        GET              compat:read                -
mem0-entity                          DELETE           personal                   mem0_user_entity
mem0-profile                         GET              personal                   mem0_user_entity
mem0-profile-settings                GET              compat:read                -
mem0-profile-settings                POST             compat:write               -
mem0-profile-jobs                    POST             compat:write               -
mem0-profile-job                     GET              compat:read                mem0_profile_job
mem0-batch                           PUT,DELETE       compat:write               -
mem0-exports                         POST             compat:read                -
mem0-export-get                      POST             compat:read                -
mem0-summary                         POST             compat:read                -
mem0-projects                        POST             compat:write               mem0_organization
mem0-project                         GET              compat:read                mem0_project
mem0-project                         PATCH,DELETE     compat:write               mem0_project
mem0-project-members                 GET              compat:read                mem0_project
mem0-project-members                 POST,PUT,DELETE  compat:write               mem0_project
mem0-webhooks                        GET              compat:read                mem0_hook_project
mem0-webhooks                        POST             compat:write               mem0_hook_project
mem0-webhook                         PUT,DELETE       compat:write               mem0_webhook
mem0-oss-memories                    GET              compat:read                -
mem0-oss-memories                    POST,DELETE      compat:write               -
mem0-oss-search                      POST             compat:read                -
mem0-oss-memory                      GET,PUT,DELETE   subject                    personal_memory_id
mem0-oss-memory-history              GET              subject                    personal_memory_id
mem0-oss-configure                   GET              compat:read                -
mem0-oss-configure                   POST             compat:write               -
mem0-oss-providers                   GET              compat:read                -
mem0-oss-instructions                POST             compat:write               -
mem0-oss-reset                       POST             compat:write               -
mem0-unknown                         GET,POST,PUT,PATCH,DELETE nobody                     -
memos-schema                         GET              public                     -
memos-add-message                    POST             compat:write               -
memos-search                         POST             compat:read                -
memos-get                            POST             compat:read                -
memos-update                         POST             compat:write               -
memos-delete                         POST             compat:write               -
memos-feedback                       POST             compat:write               -
memos-status                         POST             compat:read                -
memos-memory                         GET              compat:read                shared_memory_id
memos-memory                         GET              personal                   personal_memory_id
memos-get-message                    POST             compat:read                -
memos-kb-create                      POST             compat:read                -
memos-kb-delete                      POST             compat:read                -
memos-kb-file-add                    POST             compat:read                -
memos-kb-file-get                    POST             compat:read                -
memos-kb-file-delete                 POST             compat:read                -
memos-unknown                        GET,POST,PUT,DELETE nobody                     -

# --- /scim/v2/: the identity provider's provisioning client -------------------------------------
scim/v2/ServiceProviderConfig        GET              scim                       -
scim/v2/ResourceTypes                GET              scim                       -
scim/v2/ResourceTypes/<str:name>     GET              scim                       scim_resource_type
scim/v2/Schemas                      GET              scim                       -
scim/v2/Schemas/<str:urn>            GET              scim                       scim_schema
scim/v2/.search                      POST             scim                       -
scim/v2/Users/.search                POST             scim                       -
scim/v2/Groups/.search               POST             scim                       -
scim/v2/Users                        GET,POST         scim                       -
scim/v2/Users/<str:pk>               GET,PUT,PATCH,DELETE scim                       scim_user
scim/v2/Groups                       GET,POST         scim                       -
scim/v2/Groups/<str:pk>              GET,PUT,PATCH,DELETE scim                       scim_group
scim/v2/^(?P<rest>.*)$               GET              nobody                     scim_unknown

# --- console: signing in ----------------------------------------------------------------------
console:login                        GET,POST,PUT     public                     -
console:logout                       POST             public                     -
console:set_language                 POST             public                     -
console:javascript_catalog           GET              public                     -
console:invite                       GET,POST         public                     invitation_token
console:sso_start                    GET              public                     idp
console:sso_callback                 GET              public                     idp
console:saml_metadata                GET              public                     saml_idp
console:saml_acs                     POST             public                     saml_idp
console:saml_slo                     GET,POST         public                     saml_idp
console:oidc_backchannel_logout      POST             public                     idp
console:home                         GET              member                     -
console:switch_organization          POST             member                     -

# --- console: the organization ------------------------------------------------------------------
console:members                      GET              perm:member.view           -
console:member_create                GET,POST         perm:member.manage         -
console:member_invite                GET,POST         perm:member.manage         -
console:member                       GET              perm:member.view           member
console:member_edit                  GET,POST         perm:member.manage         member
console:member_reinvite              GET,POST         perm:member.manage         invited_member
console:invitation_revoke            POST             perm:member.manage         invited_member
console:member_deactivate            GET,POST         perm:member.manage         member
console:member_reactivate            POST             perm:member.manage         member
console:member_signin_unlock         POST             perm:member.manage         member
console:member_sso_link_allow        POST             perm:member.manage         member
console:identity_add                 POST             perm:member.manage         member
console:identity_remove              POST             perm:member.manage         member_identity
console:departments                  GET              perm:department.view       -
console:department_create            GET,POST         perm:department.manage     -
console:department                   GET              perm:department.view       department
console:department_edit              GET,POST         perm:department.manage     department
console:department_archive           GET,POST         perm:department.manage     department
console:department_restore           POST             perm:department.manage     department
console:positions                    GET              perm:position.view         -
console:position_create              GET,POST         perm:position.manage       -
console:position_edit                GET,POST         perm:position.manage       position
console:position_archive             GET,POST         perm:position.manage       position
console:position_restore             POST             perm:position.manage       position
console:audit                        GET              perm:audit.view            -
console:audit_event                  GET              perm:audit.view            audit_event
console:usage                        GET              perm:budget.view           -
console:usage_export                 GET              perm:budget.view           -
console:budget_create                GET,POST         perm:budget.manage         -
console:budget_edit                  GET,POST         perm:budget.manage         budget
console:budget_delete                POST             perm:budget.manage         budget
console:api_keys                     GET              perm:apikey.view           -
console:api_key_create               GET,POST         perm:apikey.manage         -
console:api_key_revoke               GET,POST         perm:apikey.manage         api_key
console:organization                 GET              perm:organization.view     -
console:scim_token_create            POST             perm:apikey.manage         -
console:scim_token_revoke            POST             perm:apikey.manage         scim_token
console:identity_providers           GET              perm:organization.manage   -
console:identity_provider_new        GET,POST         perm:organization.manage   -
console:identity_provider_edit       GET,POST         perm:organization.manage   idp
console:identity_provider_test       GET              perm:organization.manage   idp

# --- console: memory (a member sees their own and what their permissions add) -------------------
console:memory                       GET              perm:chat.use              -
console:memory_search                GET              perm:chat.use              -
console:memory_timeline              GET              perm:chat.use              -
console:memory_map                   GET              perm:chat.use              -
console:memory_heatmap               GET              perm:chat.use              -
console:memory_quality               GET              perm:chat.use              -
console:memory_detail                GET              member                     memory
console:memory_correct               GET,POST         perm:memory.manage         memory
console:memory_delete                POST             perm:memory.manage         memory
console:memory_detail                GET              personal                   personal_memory
console:memory_correct               GET,POST         personal                   personal_memory
console:memory_delete                POST             personal                   personal_memory

# --- console: agents ------------------------------------------------------------------------------
console:templates                    GET              perm:template.view         -
console:template_create              GET,POST         perm:template.manage       -
console:template                     GET              perm:template.view         template
console:template_new_draft           POST             perm:template.manage       template
console:template_diff                GET              perm:template.view         template
console:template_generate            GET,POST         perm:template.manage       template
console:template_version             GET              perm:template.view         template_version
console:template_version_edit        GET,POST         perm:template.manage       template_version
console:template_version_action      POST             perm:template.manage template_version_action
console:deployments                  GET              perm:deployment.manage|agent.view -
console:deployment_create            GET,POST         perm:deployment.manage     -
console:deployment                   GET              perm:deployment.manage|agent.view deployment
console:deployment_rollout           POST             perm:deployment.manage     deployment
console:deployment_sync              POST             perm:deployment.manage     deployment
console:deployment_stop              GET,POST         perm:deployment.manage     deployment
console:rollout_advance              POST             perm:deployment.manage     deployment_rollout
console:rollout_rollback             POST             perm:deployment.manage     deployment_rollout
console:agents                       GET              perm:agent.view            -
console:agent                        GET              perm:agent.view            subject_agent
console:session                      GET              personal                   subject_session
console:run_call_chain               GET              personal                   subject_run
console:chat                         GET              perm:chat.use              -
console:chat_agent                   GET,POST         subject                    subject_agent
console:chat_session                 GET              subject                    subject_session
console:chat_send                    POST             subject                    subject_session
console:chat_decide                  POST             subject subject_session_confirmation
console:chat_cancel                  POST             subject                    subject_session_run
console:chat_retry                   POST             subject                    subject_session_run

# --- console: evaluation --------------------------------------------------------------------------
console:evaluation                   GET              perm:evaluation.view       -
console:evaluation_gates             POST             perm:organization.manage   -
console:evaluation_suite_create      POST             perm:evaluation.manage     -
console:evaluation_retrieval_suite   POST             perm:evaluation.manage     -
console:evaluation_suite             GET              perm:evaluation.view       eval_suite
console:evaluation_replay            POST             perm:evaluation.manage     eval_suite
console:evaluation_run               GET              perm:evaluation.view       eval_run
console:evaluation_case_from_turn    POST             perm:evaluation.manage     -

# --- console: governance --------------------------------------------------------------------------
console:policies                     GET              perm:policy.manage         -
console:policy_chain_edit            POST             perm:policy.manage         -
console:masking_bench                GET,POST         perm:policy.manage|audit.view -
console:masking_rule_create          POST             perm:policy.manage         -
console:masking_rule_toggle          POST             perm:policy.manage         masking_rule
console:masking_rule_delete          POST             perm:policy.manage         masking_rule
console:confirmations                GET              own:confirmation.decide|audit.view -
console:confirmation_history         GET              own:confirmation.decide|audit.view -
console:confirmation GET own:confirmation.decide|audit.view confirmation
# the matrix's confirmation is routed to the subject; an owner decides any
console:confirmation_decide          POST             own:organization.manage    confirmation
console:alerts                       GET              perm:audit.view            -
console:alert                        GET              perm:audit.view            alert
console:alert_acknowledge            POST             perm:policy.manage         alert
console:alert_resolve                POST             perm:policy.manage         alert
console:alert_rules                  GET              perm:policy.manage         -
console:alert_rule_create            GET,POST         perm:policy.manage         -
console:alert_rule_edit              GET,POST         perm:policy.manage         alert_rule
console:alert_rule_delete            GET,POST         perm:policy.manage         alert_rule
console:audit_exports                GET,POST         perm:audit.export          -
console:audit_export                 GET              perm:audit.export          audit_export
console:audit_export_download        GET              perm:audit.export          audit_export

# --- console: connectors, Hub, models, MCP servers, skills ----------------------------------------
console:connector_directory          GET              perm:connector.manage      connector
console:connector_directory_sync     POST             perm:connector.manage      connector
console:connector_directory_conflict POST             perm:connector.manage      connector_conflict
console:connectors                   GET              perm:connector.manage      -
console:connector_create             GET,POST         perm:connector.manage      -
console:connector                    GET,POST         perm:connector.manage      connector
console:connector_rotate             GET,POST         perm:connector.manage      connector
console:connector_status             POST             perm:connector.manage      connector
console:connector_test               POST             perm:connector.manage      connector
console:connector_bindings           GET,POST         perm:connector.manage      connector
console:connector_binding_remove     POST             perm:connector.manage      connector_binding
console:connector_identities         GET              perm:connector.manage      connector
console:connector_identity_import    POST             perm:connector.manage      connector
console:connector_unmapped_map       GET,POST         perm:connector.manage      connector_unmapped
console:connector_unmapped_dismiss   POST             perm:connector.manage      connector_unmapped
console:hub                          GET              perm:skill.view            -
console:hub_distribution             GET              perm:skill.view            -
console:hub_install                  GET              perm:agent.view            hub_install
console:hub_install_apply            POST             perm:deployment.manage     hub_install
console:hub_install_rollback         POST             perm:deployment.manage     hub_install
console:hub_package                  GET              perm:skill.view            hub_package
console:hub_template_install         GET,POST         perm:template.manage       hub_package
console:hub_version                  GET              perm:skill.view            hub_package
console:hub_file                     GET              perm:skill.view            hub_package
console:models                       GET              perm:model.manage          -
console:provider_create              GET,POST         perm:model.manage          -
console:provider_edit                GET,POST         perm:model.manage          provider
console:provider_prices              POST             perm:model.manage          provider
console:provider_test                POST             perm:model.manage          provider
console:provider_default             POST             perm:model.manage          provider
console:provider_delete              POST             perm:model.manage          provider
console:embeddings                   GET              perm:model.manage          -
console:embeddings_reembed           POST             perm:model.manage          -
console:embeddings_activate          POST             perm:model.manage          -
console:embeddings_recall_check      POST             perm:template.manage       -
console:mcp_servers                  GET,POST         perm:connector.manage      -
console:mcp_server                   GET,POST         perm:connector.manage      mcp_server
console:mcp_server_discover          POST             perm:connector.manage      mcp_server
console:mcp_server_risks             POST             perm:connector.manage      mcp_server
console:mcp_server_active            POST             perm:connector.manage      mcp_server
console:skill_reviews                GET              perm:skill.review          -
console:skill_review_stages          GET              perm:skill.review          -
console:skill_review_stages          POST             perm:policy.manage         -
console:skill_review                 GET,POST         perm:skill.review          skill_candidate
console:skill_proposals              GET              perm:chat.use              -
console:skill_proposal_confirm       POST             subject                    subject_proposal
console:skill_proposal_dismiss       POST             subject                    subject_proposal
"""
# fmt: on


# Served in front of Django, not by the URLconf: each is declared here with its rule and where it
# is tested, and test_matrix.py checks this list against the ASGI routing.
OUTSIDE_URLCONF: dict[str, str] = {
    "/mcp/": (
        "compat: the MCP server (cadre.mcp_server), API keys only, scopes enforced per tool, "
        "another organization's objects not found: tests/api/test_mcp_server.py, "
        "tests/api/test_mcp_sweep.py"
    ),
    "ws/confirmations/": (
        "member: the confirmations a member may decide (tests/governance/test_confirmations.py)"
    ),
    "ws/chat/<int:session_id>/": "subject: the member's own chat session",
}


@dataclass(frozen=True)
class Declaration:
    route: str
    method: str
    rule: str
    permissions: tuple[str, ...]
    object: str

    @property
    def id(self) -> str:
        suffix = "" if self.object in ("-", "auto") else f"@{self.object}"
        return f"{self.method} {self.route}{suffix}"


def declarations() -> list[Declaration]:
    """MATRIX as one Declaration per (route, method, object)."""
    found: list[Declaration] = []
    for line in MATRIX.strip().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        route, methods, rule, obj = line.split()
        word, _, rest = rule.partition(":")
        if word in ("perm", "own") or (word == "personal" and rest):
            permissions = tuple(rest.split("|"))
        else:
            word, permissions = rule, ()
        assert word in RULE_WORDS, f"unknown rule {rule!r} in: {line}"
        for method in methods.split(","):
            found.append(Declaration(route, method.upper(), word, permissions, obj))
    return found
