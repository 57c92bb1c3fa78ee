"""MCP servers in the console: register an outside MCP server whose tools agents may call
(its credentials as name/value rows), discover its tools, set each tool's risk, replace or
remove its credentials, revoke or restore it. Writes go through
`cadre.agents.mcp_tools` (the API's services)."""

from __future__ import annotations

import re

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from cadre.agents import mcp_tools
from cadre.agents.models import McpServer
from cadre.agents.tools.registry import RISKS
from cadre.console.forms import add_service_error
from cadre.console.scoping import get_restricted_or_404, restricted
from cadre.console.views.base import posted, require_permission
from cadre.errors import CadreError

PERMISSION = "connector.manage"


# An HTTP header's name (RFC 9110 token) or an environment variable's.
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_CREDENTIALS = 20


class CredentialRowsField(forms.Field):
    """Holds the credential rows' errors; the rows are the posted `credential_name` and
    `credential_value` lists (a name and a secret value each, never shown again)."""

    widget = forms.HiddenInput

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("label", gettext_lazy("Credentials"))
        kwargs.setdefault(
            "help_text",
            gettext_lazy(
                "Headers sent to an HTTP server (<code>Authorization: Bearer …</code>) or "
                "environment variables for a <code>stdio</code> command. Stored encrypted; never "
                "shown again."
            ),
        )
        super().__init__(**kwargs)


def credential_rows(data, transport: str) -> dict[str, str]:
    """The posted name/value rows as a dict; ValidationError naming the row that is wrong."""
    names = data.getlist("credential_name") if hasattr(data, "getlist") else []
    values = data.getlist("credential_value") if hasattr(data, "getlist") else []
    stdio = transport == McpServer.Transport.STDIO
    pattern = ENV_NAME if stdio else HEADER_NAME
    not_a_name = (
        _("Row %(number)s: %(name)s is not an environment variable name.")
        if stdio
        else _("Row %(number)s: %(name)s is not a header name.")
    )
    found: dict[str, str] = {}
    for number, (name, value) in enumerate(zip(names, values, strict=False), 1):
        name = name.strip()
        if not name and not value:
            continue
        if not name:
            raise forms.ValidationError(
                _("Row %(number)s: give the value a name.") % {"number": number}
            )
        if not value:
            raise forms.ValidationError(
                _("Row %(number)s: %(name)s has no value.") % {"number": number, "name": name}
            )
        if not pattern.match(name):
            raise forms.ValidationError(not_a_name % {"number": number, "name": repr(name)})
        if name in found:
            raise forms.ValidationError(
                _("Row %(number)s: %(name)s is given twice.") % {"number": number, "name": name}
            )
        if len(value) > 4000:
            raise forms.ValidationError(
                _("Row %(number)s: the value is longer than 4000 characters.") % {"number": number}
            )
        found[name] = value
    if len(found) > MAX_CREDENTIALS:
        raise forms.ValidationError(
            _("At most %(count)s credentials.") % {"count": MAX_CREDENTIALS}
        )
    return found


def credential_names(form: forms.Form) -> list[str]:
    """The names to show in the rows again (values never are), and room for more."""
    names = form.data.getlist("credential_name") if form.is_bound else []
    names = [name for name in names if name.strip()]
    return names + [""] * max(3 - len(names), 1)


class McpServerForm(forms.Form):
    name = forms.CharField(
        max_length=32,
        label=gettext_lazy("Name"),
        help_text=gettext_lazy(
            "Lower-case letters, digits and hyphens; tools are named "
            "<code>mcp__&lt;name&gt;__&lt;tool&gt;</code> in templates."
        ),
    )
    transport = forms.ChoiceField(
        choices=McpServer.Transport.choices,
        initial="streamable_http",
        label=gettext_lazy("Transport"),
    )
    url = forms.CharField(
        max_length=500,
        required=False,
        label="URL",
        help_text=gettext_lazy("For Streamable HTTP."),
    )
    command = forms.CharField(
        max_length=500,
        required=False,
        label=gettext_lazy("Command"),
        help_text=gettext_lazy(
            "For <code>stdio</code>: one of the commands the operator allows "
            "(<code>CADRE_MCP_STDIO_COMMANDS</code>)."
        ),
    )
    args = forms.CharField(
        max_length=4000,
        required=False,
        label=gettext_lazy("Arguments"),
        help_text=gettext_lazy("For <code>stdio</code>: one per line."),
    )
    credentials = CredentialRowsField()
    description = forms.CharField(max_length=300, required=False, label=gettext_lazy("Description"))

    def clean_credentials(self):
        return credential_rows(self.data, self.data.get("transport") or "") or None


class McpCredentialsForm(forms.Form):
    """Replace a registered server's credentials, or remove them."""

    credentials = CredentialRowsField()
    clear = forms.BooleanField(required=False, label=gettext_lazy("Remove the stored credentials"))

    def __init__(self, *args, transport: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.transport = transport

    def clean_credentials(self):
        return credential_rows(self.data, self.transport)

    def clean(self):
        data = super().clean()
        if "credentials" not in data:
            return data
        if data.get("clear") and data["credentials"]:
            self.add_error("credentials", _("Either enter new credentials or remove them."))
        elif not data.get("clear") and not data["credentials"]:
            self.add_error("credentials", _("Enter at least one name and value."))
        return data


def _server(request, pk: int) -> McpServer:
    return get_restricted_or_404(request, McpServer, "manage", pk=pk)


@require_permission(PERMISSION)
def mcp_server_list(request):
    form = McpServerForm(posted(request))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            server = mcp_tools.mcp_server_create(
                actor=request.actor,
                name=data["name"],
                transport=data["transport"],
                url=data["url"],
                command=data["command"],
                args=[line.strip() for line in data["args"].splitlines() if line.strip()],
                credentials=data["credentials"],
                description=data["description"],
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(
                request,
                _("%(name)s was registered. Discover its tools next.") % {"name": server.name},
            )
            return redirect("console:mcp_server", pk=server.pk)
    servers = restricted(request, McpServer, "manage").order_by("name")
    return render(
        request,
        "console/mcp_servers/list.html",
        {"servers": servers, "form": form, "credential_names": credential_names(form)},
        status=400 if request.method == "POST" else 200,
    )


@require_permission(PERMISSION)
def mcp_server_detail(request, pk: int):
    server = _server(request, pk)
    form = McpCredentialsForm(posted(request), transport=server.transport)
    if request.method == "POST" and form.is_valid():
        try:
            server = mcp_tools.mcp_server_update(
                actor=request.actor, server=server, credentials=form.cleaned_data["credentials"]
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(
                request,
                (
                    _("%(name)s's credentials were replaced.")
                    if server.credentials
                    else _("%(name)s's credentials were removed.")
                )
                % {"name": server.name},
            )
            return redirect("console:mcp_server", pk=server.pk)
    return render(
        request,
        "console/mcp_servers/detail.html",
        {
            "server": server,
            "tools": mcp_tools.tools_with_risk(server),
            "risks": RISKS,
            "form": form,
            "credential_names": credential_names(form),
        },
        status=400 if request.method == "POST" else 200,
    )


@require_POST
@require_permission(PERMISSION)
def mcp_server_discover(request, pk: int):
    server = _server(request, pk)
    try:
        server = mcp_tools.mcp_server_discover(actor=request.actor, server=server)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        count = len(server.tools)
        messages.success(
            request,
            ngettext("%(name)s lists %(count)s tool.", "%(name)s lists %(count)s tools.", count)
            % {"name": server.name, "count": count},
        )
    return redirect("console:mcp_server", pk=server.pk)


@require_POST
@require_permission(PERMISSION)
def mcp_server_risks(request, pk: int):
    server = _server(request, pk)
    risks = {}
    for tool in server.tools or []:
        chosen = request.POST.get(f"risk:{tool['name']}")
        if chosen is None:
            continue
        risks[tool["name"]] = None if chosen == "default" else chosen
    try:
        mcp_tools.mcp_server_tool_risks_set(actor=request.actor, server=server, risks=risks)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Tool risks saved."))
    return redirect("console:mcp_server", pk=server.pk)


@require_POST
@require_permission(PERMISSION)
def mcp_server_active(request, pk: int):
    server = _server(request, pk)
    active = request.POST.get("active") == "1"
    mcp_tools.mcp_server_set_active(actor=request.actor, server=server, active=active)
    messages.success(
        request,
        (
            _("%(name)s was restored.")
            if active
            else _("%(name)s was revoked: agents can no longer call its tools.")
        )
        % {"name": server.name},
    )
    return redirect("console:mcp_server", pk=server.pk)


urlpatterns = [
    path("mcp-servers/", mcp_server_list, name="mcp_servers"),
    path("mcp-servers/<int:pk>/", mcp_server_detail, name="mcp_server"),
    path("mcp-servers/<int:pk>/discover/", mcp_server_discover, name="mcp_server_discover"),
    path("mcp-servers/<int:pk>/risks/", mcp_server_risks, name="mcp_server_risks"),
    path("mcp-servers/<int:pk>/active/", mcp_server_active, name="mcp_server_active"),
]
