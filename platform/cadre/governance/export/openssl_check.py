"""Checking a bundle with nothing but OpenSSL 3 and a shell: the steps an external auditor
follows, as the console's export page shows them and a test runs them (one text for both, so
the page cannot drift from what verifies).

The steps prove the bundle is what this instance signed: the key is the one whose fingerprint
was recorded, the manifest's Ed25519 signature verifies with it, and every file hashes to the
SHA-256 the signed manifest lists. Checking the hash chain row by row and against the signed
digests needs `audit_export_verify` (docs/audit.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _

from cadre.governance.export.bundle import MANIFEST, SIGNATURE

KEY_FILE = "cadre-audit-key.pem"
SIGNATURE_BINARY = "manifest.sig.bin"
VERIFIED = "Signature Verified Successfully"
NOT_VERIFIED = "Signature Verification Failure"


@dataclass(frozen=True)
class Step:
    title: str
    commands: tuple[str, ...] = ()
    # The exact lines the last command prints when the bundle is sound (none: no output).
    expected: tuple[str, ...] = ()
    note: str = ""
    # What a failure looks like, to tell it from a typing mistake.
    failure: str = ""
    failure_output: str = ""  # the line a failure prints (shown as it is, never translated)
    downloads: tuple[str, ...] = ()  # the files to fetch first


def tar_name(export_id: int) -> str:
    return f"audit-export-{export_id}.tar"


def openssl_steps(*, export_id: int, key_id: str, files: list[dict]) -> list[Step]:
    """The steps for one export: `files` are its manifest's entries ({"name", "sha256"})."""
    folder = str(export_id)
    names = [entry["name"] for entry in files]
    return [
        Step(
            title=_("Download the bundle and this instance's public key into one folder"),
            downloads=(tar_name(export_id), KEY_FILE),
            note=_(
                "Keep the key's fingerprint (the key id) in your own records: a key that "
                "does not match it proves nothing."
            ),
        ),
        Step(
            title=_("Unpack the bundle"),
            commands=(f"tar -xf {tar_name(export_id)}",),
            note=_("It unpacks into the folder %(folder)s/.") % {"folder": folder},
        ),
        Step(
            title=_("Check the key is the one you trust"),
            commands=(
                f"openssl pkey -pubin -in {KEY_FILE} -outform DER | tail -c 32"
                " | openssl dgst -sha256 -r",
            ),
            expected=(f"{key_id} *stdin",),
            note=_(
                "The SHA-256 of the raw 32-byte Ed25519 key must equal the key id you recorded."
            ),
        ),
        Step(
            title=_("Verify the manifest's signature"),
            commands=(
                f"openssl base64 -d -A -in {folder}/{SIGNATURE} -out {SIGNATURE_BINARY}",
                f"openssl pkeyutl -verify -pubin -inkey {KEY_FILE} -rawin"
                f" -in {folder}/{MANIFEST} -sigfile {SIGNATURE_BINARY}",
            ),
            expected=(VERIFIED,),
            failure=_(
                "If it prints this line instead (exit status 1), the manifest was changed or "
                "signed by another key:"
            ),
            failure_output=NOT_VERIFIED,
        ),
        Step(
            title=_("Check every file against the signed manifest"),
            commands=("openssl dgst -sha256 -r " + " ".join(f"{folder}/{n}" for n in names),),
            expected=tuple(f"{entry['sha256']} *{folder}/{entry['name']}" for entry in files),
            note=_(
                "Each hash must equal the “sha256” that %(manifest)s lists for the file (and "
                "the table above). A file whose hash differs was changed after it was signed."
            )
            % {"manifest": MANIFEST},
        ),
    ]
