"""Audit export from the console: choose a range, filters and formats, start the Celery job
(`audit_export_create`), watch its progress (htmx polling), download the signed bundle and the
public key, and read how to check them with OpenSSL alone (`export.openssl_check`)."""

from __future__ import annotations

import base64

from django.conf import settings
from django.contrib import messages
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from cadre import signing
from cadre.console.forms import add_service_error
from cadre.console.scoping import restricted, restricted_for
from cadre.console.views.base import paginate, posted, require_permission
from cadre.console.views.governance_forms import AuditExportForm
from cadre.errors import CadreError
from cadre.governance import export
from cadre.governance.export.openssl_check import KEY_FILE
from cadre.governance.models import AuditExport

# The audit log's own filter names that mean the same thing here (its list links to us with
# its current query string).
_FROM_AUDIT_LIST = ("action", "target_type", "since", "until")


def _export_or_404(request, pk: int) -> AuditExport:
    return get_object_or_404(
        restricted(request, AuditExport, "export").select_related("organization", "requested_by"),
        pk=pk,
    )


@require_permission("audit.export")
def audit_export_list(request):
    actor = request.actor
    initial = {name: request.GET[name] for name in _FROM_AUDIT_LIST if request.GET.get(name)}
    form = AuditExportForm(posted(request), actor=actor, initial=initial)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                job = export.audit_export_create(actor=actor, **form.service_arguments())
            except CadreError as error:
                add_service_error(form, error)
            else:
                messages.success(
                    request, _("The export was started; this page follows its progress.")
                )
                return redirect("console:audit_export", pk=job.pk)
        status = 400
    jobs = restricted_for(actor, AuditExport, "export").select_related("requested_by")
    return render(
        request,
        "console/governance/audit_exports.html",
        {
            "form": form,
            "page": paginate(request, jobs.order_by("-created_at", "-pk")),
            "query": "",
            "can_unmask": actor.has("policy.manage"),
            "signing_key": signing.published_key(),
        },
        status=status,
    )


def _openssl_context(job: AuditExport) -> dict:
    """The steps that check this bundle with OpenSSL, and the key they check it against (offered
    as a file: a data: link, so the download needs no route of its own)."""
    key = signing.published_key()
    pem = base64.b64encode(key["public_key_pem"].encode("ascii")).decode("ascii")
    signed_by = (job.manifest.get("signing") or {}).get("key_id", "")
    return {
        "openssl_steps": export.openssl_steps(
            export_id=job.pk, key_id=key["key_id"], files=job.manifest.get("files") or []
        ),
        "signing_key": key,
        "key_file": KEY_FILE,
        "key_data_url": f"data:application/x-pem-file;base64,{pem}",
        "tar_name": export.tar_name(job.pk),
        "signed_by_other_key": bool(signed_by) and signed_by != key["key_id"],
    }


@require_permission("audit.export")
def audit_export_detail(request, pk: int):
    job = _export_or_404(request, pk)
    ready = export.stored_bundle(job) is not None
    context = {
        "job": job,
        "ready": ready,
        "retention_days": settings.AUDIT_EXPORT_RETENTION_DAYS,
        **(_openssl_context(job) if ready else {}),
    }
    if request.htmx:
        return render(request, "console/governance/_export_status.html", context)
    return render(request, "console/governance/audit_export_detail.html", context)


@require_GET
@require_permission("audit.export")
def audit_export_download(request, pk: int):
    job = _export_or_404(request, pk)
    bundle = export.stored_bundle(job)
    if bundle is None:
        messages.error(
            request,
            _("The export is %(status)s, not ready.")
            % {"status": job.get_status_display().lower()},
        )
        return redirect("console:audit_export", pk=job.pk)
    response = StreamingHttpResponse(export.tar_stream(bundle), content_type="application/x-tar")
    response["Content-Disposition"] = f'attachment; filename="{export.tar_name(job.pk)}"'
    response["Cache-Control"] = "no-store"
    return response
