"""The org chart: the department tree and positions (create, edit, archive, restore)."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from cadre.console.department_tree import tree_order
from cadre.console.forms import DepartmentForm, PositionForm, add_service_error
from cadre.console.scoping import restricted, restricted_for
from cadre.console.views.base import paginate, posted, query_without_page, require_permission
from cadre.errors import CadreError
from cadre.tenancy import services
from cadre.tenancy.models import Department, Member, Position

_CURRENT_MEMBERS = Count(
    "members", filter=~Q(members__status=Member.Status.DEACTIVATED), distinct=True
)


def _visible_department(request, pk: int) -> Department:
    return get_object_or_404(
        restricted(request, Department, "view").select_related("parent"), pk=pk
    )


def _visible_position(request, pk: int) -> Position:
    return get_object_or_404(
        restricted(request, Position, "view").select_related("department"), pk=pk
    )


# --- departments --------------------------------------------------------------------------


@require_permission("department.view")
def department_list(request):
    show_archived = request.GET.get("archived") == "1"
    departments = restricted(request, Department, "view").annotate(member_count=_CURRENT_MEMBERS)
    archived_count = departments.filter(is_archived=True).count()
    if not show_archived:
        departments = departments.filter(is_archived=False)
    return render(
        request,
        "console/departments/list.html",
        {
            "rows": tree_order(departments),
            "show_archived": show_archived,
            "archived_count": archived_count,
            "can_manage": request.actor.may("department.manage"),
        },
    )


@require_permission("department.view")
def department_detail(request, pk: int):
    department = _visible_department(request, pk)
    actor = request.actor
    members = (
        restricted_for(actor, Member, "view")
        .filter(department=department)
        .exclude(status=Member.Status.DEACTIVATED)
        .order_by("display_name", "pk")
    )
    return render(
        request,
        "console/departments/detail.html",
        {
            "department": department,
            "children": list(
                restricted_for(actor, Department, "view")
                .filter(parent=department)
                .annotate(member_count=_CURRENT_MEMBERS)
            ),
            "positions": list(
                restricted_for(actor, Position, "view").filter(
                    department=department, is_archived=False
                )
            ),
            "page": paginate(request, members),
            "query": query_without_page(request),
            "can_manage": actor.can("department.manage", department),
        },
    )


@require_permission("department.manage")
def department_create(request):
    initial = {}
    parent_id = request.GET.get("parent")
    if parent_id and parent_id.isdigit():
        initial["parent"] = int(parent_id)
    form = DepartmentForm(posted(request), actor=request.actor, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            department = services.department_create(actor=request.actor, **form.cleaned_data)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(
                request, _("Department “%(name)s” was created.") % {"name": department.name}
            )
            return redirect("console:department", pk=department.pk)
    return render(request, "console/departments/form.html", {"form": form, "department": None})


@require_permission("department.manage")
def department_edit(request, pk: int):
    department = _visible_department(request, pk)
    initial = {
        name: getattr(department, name) for name in ("name", "parent", "code", "description")
    }
    form = DepartmentForm(
        posted(request), actor=request.actor, department=department, initial=initial
    )
    if request.method == "POST" and form.is_valid():
        changed = {name: form.cleaned_data[name] for name in form.changed_data}
        if not changed:
            messages.info(request, _("Nothing was changed."))
            return redirect("console:department", pk=department.pk)
        try:
            services.department_update(actor=request.actor, department=department, **changed)
        except CadreError as error:
            # The service set fields on the instance before failing; show the saved ones.
            department.refresh_from_db()
            add_service_error(form, error)
        else:
            messages.success(
                request, _("Department “%(name)s” was updated.") % {"name": department.name}
            )
            return redirect("console:department", pk=department.pk)
    return render(
        request, "console/departments/form.html", {"form": form, "department": department}
    )


@require_permission("department.manage")
def department_archive(request, pk: int):
    department = _visible_department(request, pk)
    error = None
    if request.method == "POST":
        try:
            services.department_archive(actor=request.actor, department=department)
        except CadreError as caught:
            error = caught.message
        else:
            messages.success(
                request, _("Department “%(name)s” was archived.") % {"name": department.name}
            )
            return redirect("console:departments")
    return render(
        request,
        "console/confirm.html",
        {
            "title": _("Archive %(name)s?") % {"name": department.name},
            "body": _(
                "An archived department no longer appears in pickers and cannot receive "
                "members. Its history stays, and it can be restored."
            ),
            "confirm_label": _("Archive department"),
            "danger": True,
            "error": error,
            "cancel_url": department_url(department),
            "crumbs": [(_("Departments"), "console:departments")],
        },
        status=409 if error else 200,
    )


@require_POST
@require_permission("department.manage")
def department_restore(request, pk: int):
    department = _visible_department(request, pk)
    try:
        services.department_update(actor=request.actor, department=department, is_archived=False)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request, _("Department “%(name)s” was restored.") % {"name": department.name}
        )
    return redirect("console:department", pk=department.pk)


def department_url(department: Department) -> str:
    return reverse("console:department", kwargs={"pk": department.pk})


# --- positions ----------------------------------------------------------------------------


@require_permission("position.view")
def position_list(request):
    show_archived = request.GET.get("archived") == "1"
    positions = (
        restricted(request, Position, "view")
        .select_related("department")
        .annotate(
            member_count=Count(
                "members", filter=~Q(members__status=Member.Status.DEACTIVATED), distinct=True
            )
        )
        .order_by("name", "pk")
    )
    archived_count = positions.filter(is_archived=True).count()
    if not show_archived:
        positions = positions.filter(is_archived=False)
    return render(
        request,
        "console/positions/list.html",
        {
            "page": paginate(request, positions, per_page=50),
            "query": query_without_page(request),
            "show_archived": show_archived,
            "archived_count": archived_count,
            "can_manage": request.actor.may("position.manage"),
        },
    )


@require_permission("position.manage")
def position_create(request):
    form = PositionForm(posted(request), actor=request.actor)
    if request.method == "POST" and form.is_valid():
        try:
            position = services.position_create(actor=request.actor, **form.cleaned_data)
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(
                request, _("Position “%(name)s” was created.") % {"name": position.name}
            )
            return redirect("console:positions")
    return render(request, "console/positions/form.html", {"form": form, "position": None})


@require_permission("position.manage")
def position_edit(request, pk: int):
    position = _visible_position(request, pk)
    initial = {
        name: getattr(position, name) for name in ("name", "code", "department", "description")
    }
    form = PositionForm(posted(request), actor=request.actor, initial=initial)
    form.fields["code"].required = True  # the code identifies it to templates and the API
    if request.method == "POST" and form.is_valid():
        changed = {name: form.cleaned_data[name] for name in form.changed_data}
        if not changed:
            messages.info(request, _("Nothing was changed."))
            return redirect("console:positions")
        try:
            services.position_update(actor=request.actor, position=position, **changed)
        except CadreError as error:
            # The service set fields on the instance before failing; show the saved ones.
            position.refresh_from_db()
            add_service_error(form, error)
        else:
            messages.success(
                request, _("Position “%(name)s” was updated.") % {"name": position.name}
            )
            return redirect("console:positions")
    return render(request, "console/positions/form.html", {"form": form, "position": position})


@require_permission("position.manage")
def position_archive(request, pk: int):
    position = _visible_position(request, pk)
    error = None
    if request.method == "POST":
        try:
            services.position_update(actor=request.actor, position=position, is_archived=True)
        except CadreError as caught:
            error = caught.message
        else:
            messages.success(
                request, _("Position “%(name)s” was archived.") % {"name": position.name}
            )
            return redirect("console:positions")
    return render(
        request,
        "console/confirm.html",
        {
            "title": _("Archive the position %(name)s?") % {"name": position.name},
            "body": _(
                "Members keep their history, but the position is no longer offered for new "
                "members or agent deployments. It can be restored."
            ),
            "confirm_label": _("Archive position"),
            "danger": True,
            "error": error,
            "cancel_url": reverse("console:position_edit", kwargs={"pk": position.pk}),
            "crumbs": [(_("Positions"), "console:positions")],
        },
        status=409 if error else 200,
    )


@require_POST
@require_permission("position.manage")
def position_restore(request, pk: int):
    position = _visible_position(request, pk)
    try:
        services.position_update(actor=request.actor, position=position, is_archived=False)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Position “%(name)s” was restored.") % {"name": position.name})
    return redirect("console:positions")
