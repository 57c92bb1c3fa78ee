"""What the SCIM service publishes: its configuration, resource types and trimmed schemas."""

from __future__ import annotations

from scim2_models import (
    URN,
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    Email,
    EnterpriseUser,
    ETag,
    Filter,
    Group,
    Patch,
    ResourceType,
    Schema,
    SchemaExtension,
    ServiceProviderConfig,
    Sort,
    User,
)

MAX_RESULTS = 200

# Only the attributes Cadre stores are published, so an identity provider (and scim2-tester,
# which reads these schemas) never sends a value that would be silently dropped.
USER_ATTRIBUTES = {
    "userName": None,
    "name": {"givenName", "familyName"},
    "displayName": None,
    "title": None,
    "active": None,
    # One e-mail and one phone per member: the first given is kept, so `primary` is moot.
    "emails": {"value"},
    "phoneNumbers": {"value"},
}
# preferredLanguage and locale are read when sent (the member's language, docs/i18n.md) but not
# published: Cadre keeps only a language it speaks, not any value a client would read back.
ENTERPRISE_ATTRIBUTES = {"employeeNumber": None, "department": None}
# A member's `display` is their own display name, not something a group may set.
GROUP_ATTRIBUTES = {"displayName": None, "members": {"value", "$ref", "type"}}


class StoredEmail(Email):
    """An e-mail as Cadre holds it. scim2-models types `value` as pydantic's EmailStr, which
    refuses special-use domains (`.local`, `.test`, …) that Cadre stores (`admin@demo.local`):
    reading such a member back made a whole listing, and Entra's deprovisioning PATCH, a 400.
    What Cadre stores serializes as it is; what a client sends is checked by the provisioning
    service with the rule every other way into Cadre uses (Django's EmailValidator)."""

    value: str | None = None


class UserResource(User[EnterpriseUser]):
    """A member as a SCIM User with the enterprise extension, e-mails as Cadre holds them."""

    emails: list[StoredEmail] | None = None


def _trimmed(schema: Schema, keep: dict) -> Schema:
    attributes = []
    for attribute in schema.attributes or []:
        if attribute.name not in keep:
            continue
        subs = keep[attribute.name]
        if subs is not None:
            attribute.sub_attributes = [
                sub for sub in attribute.sub_attributes or [] if sub.name in subs
            ]
        attributes.append(attribute)
    schema.attributes = attributes
    return schema


def published_schemas() -> list[Schema]:
    return [
        _trimmed(User.to_schema(), USER_ATTRIBUTES),
        _trimmed(EnterpriseUser.to_schema(), ENTERPRISE_ATTRIBUTES),
        _trimmed(Group.to_schema(), GROUP_ATTRIBUTES),
    ]


def resource_types() -> list[ResourceType]:
    return [
        ResourceType(
            id="User",
            name="User",
            endpoint="/Users",
            description="A member of the organization",
            schema_=URN(User.__schema__),
            schema_extensions=[
                SchemaExtension(schema_=URN(EnterpriseUser.__schema__), required=False)
            ],
        ),
        ResourceType(
            id="Group",
            name="Group",
            endpoint="/Groups",
            description="A department of the organization",
            schema_=URN(Group.__schema__),
        ),
    ]


def service_provider_config(documentation_uri: str | None = None) -> ServiceProviderConfig:
    return ServiceProviderConfig(
        documentation_uri=documentation_uri,
        patch=Patch(supported=True),
        bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
        filter=Filter(supported=True, max_results=MAX_RESULTS),
        change_password=ChangePassword(supported=False),
        sort=Sort(supported=False),
        etag=ETag(supported=True),
        authentication_schemes=[
            AuthenticationScheme(
                type=AuthenticationScheme.Type.oauthbearertoken,
                name="Bearer token",
                description="A per-organization SCIM token created in the console or with "
                "`cadre manage scim_token --org <slug>`.",
                primary=True,
            )
        ],
    )
