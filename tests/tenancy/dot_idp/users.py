"""The identity provider's user administration: a user with password, e-mail (verified or
not), name, employee number and groups, created or changed; what an IdP's admin API does."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.db import transaction

from tests.tenancy.dot_idp.models import Profile


@transaction.atomic
def user_put(
    *,
    username: str,
    password: str,
    email: str = "",
    email_verified: bool = False,
    name: str = "",
    employee_no: str = "",
    groups: list[str] | tuple[str, ...] = (),
) -> User:
    user, _ = User.objects.get_or_create(username=username)
    first, _, last = name.partition(" ")
    user.first_name, user.last_name, user.email = first, last, email
    user.set_password(password)
    user.save()
    Profile.objects.update_or_create(
        user=user, defaults={"email_verified": email_verified, "employee_no": employee_no}
    )
    user.groups.set([Group.objects.get_or_create(name=group)[0] for group in groups])
    return user
