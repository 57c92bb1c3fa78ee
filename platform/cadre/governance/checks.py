"""`cadre doctor`'s governance checks: where export bundles and the signed audit digests are
stored, and that on several machines it is not one machine's disk."""

from __future__ import annotations

from django.conf import settings
from django.core.files.storage import storages
from django.utils.translation import gettext as _

from cadre import object_storage
from cadre.checks import FAIL, OK, Check

# alias in STORAGES -> the name doctor prints
STORED = (("exports", "export storage"), ("audit_anchors", "audit anchors"))


def doctor_checks() -> list[Check]:
    checks = []
    for alias, name in STORED:
        storage = storages[alias]
        where = object_storage.describe(storage)
        if object_storage.is_local(storage):
            if settings.CLUSTER:
                checks.append(
                    Check(
                        FAIL,
                        name,
                        _(
                            "%(where)s is this machine's disk: the other machines do not see "
                            "it, and it is lost with this one"
                        )
                        % {"where": where},
                        _("set CADRE_S3_BUCKET (and CADRE_S3_ANCHOR_BUCKET) on every machine"),
                    )
                )
            else:
                checks.append(Check(OK, name, _("%(where)s (one machine)") % {"where": where}))
            continue
        try:
            storage.listdir("")
        except Exception as error:  # any failure to reach the bucket is the finding
            checks.append(
                Check(
                    FAIL,
                    name,
                    _("cannot list %(where)s: %(error)s") % {"where": where, "error": error},
                    _("check CADRE_S3_ENDPOINT_URL, the bucket and the credentials"),
                )
            )
            continue
        checks.append(Check(OK, name, where))
    return checks
