"""factory_boy factories for tenancy objects (bypass services: for arranging tests only)."""

from __future__ import annotations

import factory

from cadre.tenancy.models import Department, IMIdentity, Member, Organization, Position, User


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization

    name = factory.Sequence(lambda n: f"Organization {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User

    email = factory.Sequence(lambda n: f"user{n}@example.test")
    password = factory.django.Password("correct-horse-battery-9")


class DepartmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Department

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"Department {n}")


class PositionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Position

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"Position {n}")
    code = factory.Sequence(lambda n: f"position-{n}")


class MemberFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Member

    organization = factory.SubFactory(OrganizationFactory)
    display_name = factory.Sequence(lambda n: f"Member {n}")
    email = factory.Sequence(lambda n: f"member{n}@example.test")
    roles = factory.LazyFunction(lambda: ["employee"])
    user = factory.SubFactory(UserFactory, email=factory.SelfAttribute("..email"))


class IMIdentityFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = IMIdentity

    member = factory.SubFactory(MemberFactory)
    organization = factory.SelfAttribute("member.organization")
    platform = "feishu"
    platform_user_id = factory.Sequence(lambda n: f"ou_{n:08d}")
