"""Write paths for tenancy. Each service checks the actor's permission and audits itself.

The package is split by concern; import from `cadre.tenancy.services`.
"""

from __future__ import annotations

from cadre.tenancy.services.api_keys import (
    API_KEY_PREFIX,
    api_key_create,
    api_key_hash,
    api_key_parse,
    api_key_revoke,
    api_key_touch,
)
from cadre.tenancy.services.grants import object_grant, object_grant_revoke
from cadre.tenancy.services.identities import im_identity_create, im_identity_delete
from cadre.tenancy.services.invitations import (
    invitation_accept,
    invitation_email,
    invitation_emailed,
    invitation_lookup,
    invitation_revoke,
    mail_delivers,
    member_invite,
)
from cadre.tenancy.services.members import (
    MEMBER_FIELDS,
    may_allow_sso_link,
    member_create,
    member_deactivate,
    member_deactivated,
    member_reactivate,
    member_sso_link_allow,
    member_update,
)
from cadre.tenancy.services.organizations import (
    DEPARTMENT_FIELDS,
    ORGANIZATION_FIELDS,
    POSITION_FIELDS,
    department_archive,
    department_create,
    department_update,
    organization_create,
    organization_update,
    position_create,
    position_update,
)
from cadre.tenancy.services.preferences import member_language_set
from cadre.tenancy.services.provisioning import (
    scim_group_delete,
    scim_group_provision,
    scim_user_delete,
    scim_user_provision,
)
from cadre.tenancy.services.scim_tokens import (
    scim_token_create,
    scim_token_resolve,
    scim_token_revoke,
)

__all__ = [
    "API_KEY_PREFIX",
    "DEPARTMENT_FIELDS",
    "MEMBER_FIELDS",
    "ORGANIZATION_FIELDS",
    "POSITION_FIELDS",
    "api_key_create",
    "api_key_hash",
    "api_key_parse",
    "api_key_revoke",
    "api_key_touch",
    "department_archive",
    "department_create",
    "department_update",
    "im_identity_create",
    "im_identity_delete",
    "invitation_accept",
    "invitation_email",
    "invitation_emailed",
    "invitation_lookup",
    "invitation_revoke",
    "mail_delivers",
    "may_allow_sso_link",
    "member_create",
    "member_deactivate",
    "member_deactivated",
    "member_invite",
    "member_language_set",
    "member_reactivate",
    "member_sso_link_allow",
    "member_update",
    "object_grant",
    "object_grant_revoke",
    "organization_create",
    "organization_update",
    "position_create",
    "position_update",
    "scim_group_delete",
    "scim_group_provision",
    "scim_token_create",
    "scim_token_resolve",
    "scim_token_revoke",
    "scim_user_delete",
    "scim_user_provision",
]
