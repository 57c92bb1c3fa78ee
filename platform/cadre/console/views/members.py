"""Members: the directory, a member's page, add / invite / edit / deactivate, IM identities."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.db.models import Q
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from cadre.agents.selectors import agent_find
from cadre.console.forms import (
    DeactivateForm,
    IdentityForm,
    InviteForm,
    MemberFilterForm,
    MemberForm,
    add_service_error,
)
from cadre.console.scoping import get_restricted_or_404, restricted, restricted_for
from cadre.console.views.base import paginate, posted, query_without_page, require_permission
from cadre.errors import CadreError
from cadre.tenancy import services
from cadre.tenancy.models import IMIdentity, Member
from cadre.tenancy.roles import ROLES
from cadre.tenancy.services.signin import signin_lock_state, signin_unlock

MEMBER_FIELDS = (
    "display_name",
    "email",
    "mobile",
    "employee_no",
    "title",
    "department",
    "manager",
    "roles",
    "language",
)


def _visible_member(request, pk: int) -> Member:
    """A member the actor may see, or 404 (another organization's member does not exist)."""
    queryset = restricted(request, Member, "view").select_related("department", "manager", "user")
    return get_object_or_404(queryset, pk=pk)


@require_permission("member.view")
def member_list(request):
    actor = request.actor
    filters = MemberFilterForm(request.GET or None, actor=actor)
    members = (
        restricted_for(actor, Member, "view")
        .select_related("department")
        .order_by("display_name", "pk")
    )
    if filters.is_valid():
        data = filters.cleaned_data
        if data["q"]:
            term = data["q"].strip()
            members = members.filter(
                Q(display_name__icontains=term)
                | Q(email__icontains=term)
                | Q(employee_no__icontains=term)
            )
        if data["status"]:
            members = members.filter(status=data["status"])
        if data["department"]:
            members = members.filter(department=data["department"])
        if data["role"]:
            members = members.filter(roles__contains=[data["role"]])
    page = paginate(request, members)
    context = {
        "filters": filters,
        "page": page,
        "query": query_without_page(request),
        "filtered": bool(
            request.GET.get("q")
            or request.GET.get("status")
            or request.GET.get("department")
            or request.GET.get("role")
        ),
        "role_labels": {name: role.label for name, role in ROLES.items()},
        "can_manage": actor.may("member.manage"),
    }
    # htmx live search swaps only the results, keeping the focus in the search box.
    template = "console/members/_results.html" if request.htmx else "console/members/list.html"
    return render(request, template, context)


MEMBER_AGENTS = 20


def _detail_context(request, member: Member, identity_form: IdentityForm | None = None) -> dict:
    can_manage = request.actor.can("member.manage", member)
    pending = member.invitations.filter(accepted_at=None, revoked_at=None).first()
    return {
        "member": member,
        "positions": list(member.positions.all()),
        "identities": list(member.im_identities.all()),
        "reports": list(member.reports.exclude(status=Member.Status.DEACTIVATED)[:20]),
        # The member's agents the viewer may see (all of them with agent.view).
        "agents": list(agent_find(request.actor, member_id=member.pk)[:MEMBER_AGENTS]),
        "can_manage": can_manage,
        "may_allow_sso_link": member.sso_link_held
        and services.may_allow_sso_link(request.actor, member),
        "identity_form": (identity_form or IdentityForm()) if can_manage else None,
        "role_labels": {name: role.label for name, role in ROLES.items()},
        "pending_invitation": pending,
        "invitation_emailed": services.invitation_emailed(pending) if pending else False,
        "signin_lock": signin_lock_state(member) if member.user_id else None,
    }


@require_permission("member.view")
def member_detail(request, pk: int):
    member = _visible_member(request, pk)
    return render(request, "console/members/detail.html", _detail_context(request, member))


@require_permission("member.manage")
def member_create(request):
    form = MemberForm(posted(request), actor=request.actor)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        positions = list(data.pop("positions") or [])
        try:
            member = services.member_create(actor=request.actor, positions=positions, **data)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("%(name)s was added.") % {"name": member.display_name})
            return redirect("console:member", pk=member.pk)
    return render(request, "console/members/form.html", {"form": form, "member": None})


@require_permission("member.manage")
def member_edit(request, pk: int):
    member = _visible_member(request, pk)
    initial = {name: getattr(member, name) for name in MEMBER_FIELDS}
    initial["positions"] = list(member.positions.all())
    form = MemberForm(posted(request), actor=request.actor, member=member, initial=initial)
    if request.method == "POST" and form.is_valid():
        changed = {
            name: form.cleaned_data[name] for name in form.changed_data if name in MEMBER_FIELDS
        }
        positions = (
            list(form.cleaned_data["positions"]) if "positions" in form.changed_data else None
        )
        if not changed and positions is None:
            messages.info(request, _("Nothing was changed."))
            return redirect("console:member", pk=member.pk)
        try:
            services.member_update(
                actor=request.actor, member=member, positions=positions, **changed
            )
        except CadreError as error:
            # The service set fields on the instance before failing; show the saved ones.
            member.refresh_from_db()
            add_service_error(form, error)
        else:
            messages.success(request, _("%(name)s was updated.") % {"name": member.display_name})
            return redirect("console:member", pk=member.pk)
    return render(request, "console/members/form.html", {"form": form, "member": member})


@require_permission("member.manage")
def member_invite(request):
    form = InviteForm(posted(request), actor=request.actor)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        data["positions"] = list(data.get("positions") or []) or None
        try:
            member, invitation, token = services.member_invite(actor=request.actor, **data)
        except CadreError as error:
            add_service_error(form, error)
        else:
            return _invited(request, member, invitation, token)
    return render(request, "console/members/invite.html", {"form": form})


def _invited(request, member: Member, invitation, token: str):
    """The page after an invitation: e-mailed when mail is configured, and says which; the link
    is shown either way (the token exists only in this response, only its hash is stored)."""
    url = f"{settings.CADRE_BASE_URL}/invite/{token}/"
    emailed = services.invitation_email(actor=request.actor, invitation=invitation, url=url)
    response = render(
        request,
        "console/members/invited.html",
        {
            "member": member,
            "invitation": invitation,
            "invite_url": url,
            "emailed": emailed,
            "mail_configured": services.mail_delivers(),
        },
    )
    response["Cache-Control"] = "no-store"
    return response


@require_permission("member.manage")
def member_reinvite(request, pk: int):
    """A new invitation link for a member who has no login yet (revokes the previous one)."""
    member = _visible_member(request, pk)
    if request.method != "POST":
        return redirect("console:member", pk=member.pk)
    try:
        member, invitation, token = services.member_invite(
            actor=request.actor, email=member.email, member=member
        )
    except CadreError as error:
        messages.error(request, error.message)
        return redirect("console:member", pk=member.pk)
    return _invited(request, member, invitation, token)


@require_permission("member.manage")
def member_deactivate(request, pk: int):
    member = _visible_member(request, pk)
    form = DeactivateForm(posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            services.member_deactivate(
                actor=request.actor, member=member, reason=form.cleaned_data["reason"]
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(
                request, _("%(name)s was deactivated.") % {"name": member.display_name}
            )
            return redirect("console:member", pk=member.pk)
    return render(request, "console/members/deactivate.html", {"form": form, "member": member})


@require_POST
@require_permission("member.manage")
def member_reactivate(request, pk: int):
    member = _visible_member(request, pk)
    try:
        services.member_reactivate(actor=request.actor, member=member)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("%(name)s was reactivated.") % {"name": member.display_name})
    return redirect("console:member", pk=member.pk)


@require_POST
@require_permission("member.manage")
def member_signin_unlock(request, pk: int):
    member = _visible_member(request, pk)
    try:
        signin_unlock(actor=request.actor, member=member)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("%(name)s can sign in again.") % {"name": member.display_name})
    return redirect("console:member", pk=member.pk)


@require_POST
@require_permission("member.manage")
def member_sso_link_allow(request, pk: int):
    member = _visible_member(request, pk)
    try:
        services.member_sso_link_allow(actor=request.actor, member=member)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            _("Single sign-on may link %(name)s's account again.") % {"name": member.display_name},
        )
    return redirect("console:member", pk=member.pk)


@require_POST
@require_permission("member.manage")
def identity_add(request, pk: int):
    member = _visible_member(request, pk)
    form = IdentityForm(request.POST)
    if form.is_valid():
        try:
            services.im_identity_create(actor=request.actor, member=member, **form.cleaned_data)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(request, _("The IM account was linked."))
            return redirect("console:member", pk=member.pk)
    # Show the member page again with the form's errors in place.
    return render(
        request, "console/members/detail.html", _detail_context(request, member, identity_form=form)
    )


@require_POST
@require_permission("member.manage")
def identity_remove(request, pk: int, identity_pk: int):
    member = _visible_member(request, pk)
    identity = get_restricted_or_404(request, IMIdentity, "view", pk=identity_pk, member=member)
    try:
        services.im_identity_delete(actor=request.actor, identity=identity)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("The IM account was unlinked."))
    return redirect("console:member", pk=member.pk)


@require_POST
@require_permission("member.manage")
def invitation_revoke(request, pk: int):
    """Withdraw a member's pending invitation link."""
    member = _visible_member(request, pk)
    invitation = member.invitations.filter(accepted_at=None, revoked_at=None).first()
    if invitation is None:
        messages.info(request, _("There is no pending invitation to withdraw."))
        return redirect("console:member", pk=member.pk)
    try:
        services.invitation_revoke(actor=request.actor, invitation=invitation)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("The invitation link was withdrawn; it no longer works."))
    return redirect("console:member", pk=member.pk)
