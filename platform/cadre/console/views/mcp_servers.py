"""MCP servers in the console: register an outside MCP server whose tools agents may call,
discover its tools, set each tool's risk, revoke or restore it. Writes go through
`cadre.agents.mcp_tools` (the API's services)."""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from cadre.agents import mcp_tools
from cadre.agents.models import McpServer
from cadre.agents.tools.registry import RISKS
from cadre.console.forms import add_service_error
from cadre.console.scoping import get_restricted_or_404, restricted
from cadre.console.views.base import posted, require_permission
from cadre.errors import CadreError

PERMISSION = "connector.manage"


class McpServerForm(forms.Form):
    name = forms.CharField(
        max_length=32,
        help_text="Lower-case letters, digits and hyphens; tools are named "
        "<code>mcp__&lt;name&gt;__&lt;tool&gt;</code> in templates.",
    )
    transport = forms.ChoiceField(choices=McpServer.Transport.choices, initial="streamable_http")
    url = forms.CharField(
        max_length=500, required=False, label="URL", help_text="For Streamable HTTP."
    )
    command = forms.CharField(
        max_length=500,
        required=False,
        help_text="For stdio: one of the commands the operator allows (CADRE_MCP_STDIO_COMMANDS).",
    )
    args = forms.CharField(
        max_length=4000, required=False, label="Arguments", help_text="For stdio: one per line."
    )
    credentials = forms.CharField(
        max_length=8000,
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text='A JSON object: headers for HTTP (<code>{"Authorization": "Bearer …"}</code>) '
        "or environment variables for stdio. Stored encrypted; never shown again.",
    )
    description = forms.CharField(max_length=300, required=False)

    def clean_credentials(self):
        text = self.cleaned_data.get("credentials") or ""
        if not text.strip():
            return None
        try:
            value = json.loads(text)
        except ValueError:
            raise forms.ValidationError("Not valid JSON.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("A JSON object.")
        return value


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
            messages.success(request, f"{server.name} was registered. Discover its tools next.")
            return redirect("console:mcp_server", pk=server.pk)
    servers = restricted(request, McpServer, "manage").order_by("name")
    return render(
        request,
        "console/mcp_servers/list.html",
        {"servers": servers, "form": form},
        status=400 if request.method == "POST" else 200,
    )


@require_permission(PERMISSION)
def mcp_server_detail(request, pk: int):
    server = _server(request, pk)
    return render(
        request,
        "console/mcp_servers/detail.html",
        {"server": server, "tools": mcp_tools.tools_with_risk(server), "risks": RISKS},
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
        messages.success(request, f"{server.name} lists {count} tool{'s' if count != 1 else ''}.")
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
        messages.success(request, "Tool risks saved.")
    return redirect("console:mcp_server", pk=server.pk)


@require_POST
@require_permission(PERMISSION)
def mcp_server_active(request, pk: int):
    server = _server(request, pk)
    active = request.POST.get("active") == "1"
    mcp_tools.mcp_server_set_active(actor=request.actor, server=server, active=active)
    messages.success(
        request,
        f"{server.name} was restored."
        if active
        else f"{server.name} was revoked: agents can no longer call its tools.",
    )
    return redirect("console:mcp_server", pk=server.pk)


urlpatterns = [
    path("mcp-servers/", mcp_server_list, name="mcp_servers"),
    path("mcp-servers/<int:pk>/", mcp_server_detail, name="mcp_server"),
    path("mcp-servers/<int:pk>/discover/", mcp_server_discover, name="mcp_server_discover"),
    path("mcp-servers/<int:pk>/risks/", mcp_server_risks, name="mcp_server_risks"),
    path("mcp-servers/<int:pk>/active/", mcp_server_active, name="mcp_server_active"),
]
