"""Members as SCIM Users and departments as SCIM Groups, and SCIM filters as querysets."""

from __future__ import annotations

import hashlib
import json

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db.models import Q
from django.utils.translation import gettext as _
from scim2_models import EnterpriseUser, Group, InvalidFilterException, ScimFilter, User
from scim2_models.path.expressions import (
    CompareOperator,
    Comparison,
    LogicalExpr,
    LogicalOperator,
    Not,
    Present,
)

from cadre.identifiers import parse_pk
from cadre.tenancy.languages import supported
from cadre.tenancy.models import Department, Member

USER_SCHEMA = User.__schema__
ENTERPRISE_SCHEMA = EnterpriseUser.__schema__
GROUP_SCHEMA = Group.__schema__

# Filterable attributes (lower-cased SCIM path → model field).
USER_FILTER_FIELDS = {
    "id": "pk",
    "username": "user_name",
    "externalid": "external_id",
    "displayname": "display_name",
    "title": "title",
    "emails": "email",
    "emails.value": "email",
    "name.givenname": "given_name",
    "name.familyname": "family_name",
    "phonenumbers.value": "mobile",
    "employeenumber": "employee_no",
    "department": "department__name",
}
GROUP_FILTER_FIELDS = {
    "id": "pk",
    "displayname": "name",
    "externalid": "external_id",
    "members": "members__pk",
    "members.value": "members__pk",
}
_LOOKUPS = {
    CompareOperator.eq: "iexact",
    CompareOperator.co: "icontains",
    CompareOperator.sw: "istartswith",
    CompareOperator.ew: "iendswith",
}


def version_of(document: dict) -> str:
    """A weak ETag over what the resource says (its meta aside): changes with any attribute."""
    body = json.dumps({k: v for k, v in document.items() if k != "meta"}, sort_keys=True)
    return 'W/"' + hashlib.sha256(body.encode()).hexdigest()[:20] + '"'


def _meta(document: dict, resource_type: str, created, location: str) -> dict:
    stamp = created.isoformat()
    document["meta"] = {
        "resourceType": resource_type,
        "created": stamp,
        "lastModified": stamp,
        "location": location,
        "version": version_of(document),
    }
    return document


def user_document(member: Member, base_url: str) -> dict:
    document: dict = {
        "schemas": [USER_SCHEMA, ENTERPRISE_SCHEMA],
        "id": str(member.pk),
        "userName": member.user_name or member.email or f"member-{member.pk}",
        "displayName": member.display_name,
        "active": member.status == Member.Status.ACTIVE,
    }
    if member.external_id:
        document["externalId"] = member.external_id
    name = {"givenName": member.given_name, "familyName": member.family_name}
    if any(name.values()):
        document["name"] = {k: v for k, v in name.items() if v}
    if member.title:
        document["title"] = member.title
    if member.email:
        document["emails"] = [{"value": member.email}]
    if member.mobile:
        document["phoneNumbers"] = [{"value": member.mobile}]
    enterprise = {}
    if member.employee_no:
        enterprise["employeeNumber"] = member.employee_no
    if member.department_id:
        enterprise["department"] = member.department.name
    if enterprise:
        document[ENTERPRISE_SCHEMA] = enterprise
    return _meta(document, "User", member.created_at, f"{base_url}Users/{member.pk}")


def group_document(department: Department, base_url: str) -> dict:
    members = sorted(department.members.all(), key=lambda m: m.pk)
    document: dict = {
        "schemas": [GROUP_SCHEMA],
        "id": str(department.pk),
        "displayName": department.name,
        "members": [
            {
                "value": str(m.pk),
                "$ref": f"{base_url}Users/{m.pk}",
                "type": "User",
            }
            for m in members
            if m.scim_deleted_at is None
        ],
    }
    if department.external_id:
        document["externalId"] = department.external_id
    return _meta(document, "Group", department.created_at, f"{base_url}Groups/{department.pk}")


def user_fields(user: User) -> dict:
    """Member fields from a parsed SCIM User (the values the identity provider sent)."""
    emails = user.emails or []
    primary = next((e for e in emails if e.primary), emails[0] if emails else None)
    email = (primary.value if primary and primary.value else "") or ""
    user_name = (user.user_name or "").strip()
    if not email and _is_email(user_name):
        email = user_name
    phones = user.phone_numbers or []
    phone = next((p for p in phones if p.primary), phones[0] if phones else None)
    given = (user.name.given_name if user.name else None) or ""
    family = (user.name.family_name if user.name else None) or ""
    enterprise = user[EnterpriseUser]
    display = user.display_name or " ".join(p for p in (given, family) if p) or user_name
    return {
        "user_name": user_name,
        "email": email,
        "display_name": display[:150],
        "given_name": given[:150],
        "family_name": family[:150],
        "title": (user.title or "")[:150],
        "mobile": ((phone.value if phone else None) or "")[:32],
        "external_id": (user.external_id or "")[:191],
        "employee_no": ((enterprise.employee_number if enterprise else None) or "")[:64],
        "department_name": ((enterprise.department if enterprise else None) or "").strip(),
        "active": user.active is not False,
        # preferredLanguage (RFC 7643 §4.1.1, "zh-CN") or else locale: the language the member
        # reads Cadre in; one Cadre does not speak leaves it to the browser. None: not sent.
        "language": _language(user.preferred_language, user.locale),
    }


def _language(preferred: str | None, locale: str | None) -> str | None:
    if not preferred and not locale:
        return None
    return supported(preferred) or supported(locale) or ""


def _is_email(text: str) -> bool:
    try:
        validate_email(text)
    except ValidationError:
        return False
    return True


def filter_q(text: str, model, fields: dict) -> Q:
    """A SCIM filter as a Q over `fields`; anything Cadre cannot evaluate is invalidFilter."""
    try:
        ast = ScimFilter[model](text).ast
    except InvalidFilterException:
        raise
    except Exception as exc:  # the parser's own errors: a client mistake, never a 500
        raise InvalidFilterException(detail=str(exc)) from None
    return _node_q(ast, fields)


def _node_q(node, fields: dict) -> Q:
    if isinstance(node, LogicalExpr):
        parts = [_node_q(term, fields) for term in node.terms]
        combined = parts[0]
        for part in parts[1:]:
            combined = combined & part if node.op == LogicalOperator.and_ else combined | part
        return combined
    if isinstance(node, Not):
        return ~_node_q(node.expr, fields)
    if isinstance(node, Present | Comparison):
        path = node.attr_path
        key = (path.attr + (f".{path.sub_attr}" if path.sub_attr else "")).lower()
        if key == "active":
            if isinstance(node, Present):
                return Q()
            if node.op not in (CompareOperator.eq, CompareOperator.ne):
                raise InvalidFilterException(detail=_("active takes eq or ne."))
            wanted = node.value is True or str(node.value).lower() == "true"
            condition = Q(status=Member.Status.ACTIVE)
            return condition if wanted == (node.op == CompareOperator.eq) else ~condition
        field = fields.get(key)
        if field is None:
            raise InvalidFilterException(
                detail=_("Cadre cannot filter on %(path)s.") % {"path": path}
            )
        if isinstance(node, Present):
            return ~Q(**{field: ""}) & Q(**{f"{field}__isnull": False})
        value = node.value
        if field.endswith("pk"):
            if node.op not in (CompareOperator.eq, CompareOperator.ne):
                raise InvalidFilterException(detail=_("%(path)s takes eq or ne.") % {"path": path})
            # Ids are ASCII digits within bigint; "²" or a longer number names no resource.
            key = parse_pk(value)
            matches = Q(**{field: key}) if key is not None else Q(pk__in=[])
            return matches if node.op == CompareOperator.eq else ~matches
        if node.op == CompareOperator.ne:
            return ~Q(**{f"{field}__iexact": value})
        lookup = _LOOKUPS.get(node.op)
        if lookup is None:
            raise InvalidFilterException(
                detail=_("Cadre cannot compare %(path)s with %(op)s.")
                % {"path": path, "op": node.op}
            )
        return Q(**{f"{field}__{lookup}": value})
    raise InvalidFilterException(detail=_("Cadre cannot evaluate that filter."))
