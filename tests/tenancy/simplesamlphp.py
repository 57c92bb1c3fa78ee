"""SimpleSAMLphp (Debian's `simplesamlphp` package) as the SAML 2.0 identity provider of the SAML
tests: served by PHP's built-in web server on loopback, with a configuration directory of the
test's own (SIMPLESAMLPHP_CONFIG_DIR): the hosted IdP with a key pair made at start, the
exampleauth module's static users (with e-mail, name and groups attributes), and Cadre's SP
read from the SP metadata XML Cadre publishes (written by `sp_metadata`).

A different code base from Cadre's SP (pysaml2): a misreading of the standard on either side
shows as a failed sign-in rather than agreeing with itself."""

from __future__ import annotations

import html
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from tests.tenancy.saml_idp import key_and_certificate

PHP = shutil.which("php") or "/usr/bin/php"
SIMPLESAMLPHP = Path("/usr/share/simplesamlphp")


def available() -> str:
    """'' when SimpleSAMLphp and php-cli are installed, else why not (the skip reason)."""
    if not Path(PHP).exists():
        return "php-cli is missing (make simplesamlphp)"
    if not (SIMPLESAMLPHP / "www" / "saml2" / "idp" / "SSOService.php").exists():
        return "SimpleSAMLphp is missing (make simplesamlphp)"
    check = [PHP, "-r", 'exit(class_exists("DOMDocument") ? 0 : 1);']
    if subprocess.run(check, capture_output=True, timeout=30).returncode != 0:
        return "php-xml is missing (make simplesamlphp)"
    return ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _php(value) -> str:
    """A Python value as a PHP literal (str, bool, int, list, dict)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "[" + ", ".join(_php(item) for item in value) + "]"
    if isinstance(value, dict):
        return "[" + ", ".join(f"{_php(k)} => {_php(v)}" for k, v in value.items()) + "]"
    raise TypeError(type(value))


class SimpleSamlPhp:
    """One SimpleSAMLphp IdP process. `users` maps login → (password, attributes) and is
    written at start; `sp_metadata(xml)` tells it Cadre's SP (read again on every request)."""

    def __init__(self, users: dict[str, dict] | None = None, *, encrypt_assertions: bool = True):
        self.users = users or {}
        self.encrypt_assertions = encrypt_assertions
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.entity_id = f"{self.url}/saml2/idp/metadata.php"
        self.sso_url = f"{self.url}/saml2/idp/SSOService.php"
        self.slo_url = f"{self.url}/saml2/idp/SingleLogoutService.php"
        self._folder = Path(tempfile.mkdtemp(prefix="cadre-simplesamlphp-"))
        self._process: subprocess.Popen | None = None

    # --- configuration ----------------------------------------------------------------------

    def _write_config(self) -> None:
        folder = self._folder
        for name in ("cert", "metadata", "log", "tmp", "data", "sessions"):
            (folder / name).mkdir(exist_ok=True)
        key_pem, cert_pem = key_and_certificate("SimpleSAMLphp test IdP")
        (folder / "cert" / "idp.key").write_bytes(key_pem)
        (folder / "cert" / "idp.crt").write_bytes(cert_pem)
        self.certificate_pem = cert_pem.decode()
        self.sp_metadata("")
        config = {
            "baseurlpath": f"{self.url}/",
            "certdir": f"{folder}/cert/",
            "loggingdir": f"{folder}/log/",
            "datadir": f"{folder}/data/",
            "tempdir": f"{folder}/tmp",
            "metadatadir": f"{folder}/metadata/",
            "technicalcontact_name": "Cadre tests",
            "technicalcontact_email": "tests@cadre.test",
            "secretsalt": "cadre-test-salt-" + os.urandom(8).hex(),
            "auth.adminpassword": "cadre-test-admin-" + os.urandom(8).hex(),
            "admin.protectindexpage": True,
            "admin.checkforupdates": False,
            "timezone": "UTC",
            "enable.saml20-idp": True,
            "module.enable": {"exampleauth": True, "core": True, "saml": True, "admin": True},
            "logging.level": 7,
            "logging.handler": "file",
            "logging.logfile": "simplesamlphp.log",
            "session.cookie.secure": False,
            "session.phpsession.savepath": f"{folder}/sessions",
            "language.cookie.secure": False,
            "store.type": "phpsession",
            "production": False,
            # Where a logout may return the browser to (Cadre's pages).
            "trusted.url.domains": ["testserver", "127.0.0.1"],
            "showerrors": True,
            "metadata.sources": [
                {"type": "flatfile"},
                {"type": "xml", "file": f"{folder}/metadata/cadre-sp.xml"},
            ],
        }
        # SimpleSAMLphp's config.php must define $config; `samesite` stays unset (null).
        (folder / "config.php").write_text(f"<?php\n$config = {_php(config)};\n")
        users = {
            f"{login}:{user['password']}": {
                name: values if isinstance(values, list) else [values]
                for name, values in user["attributes"].items()
            }
            for login, user in self.users.items()
        }
        sources = {
            "admin": ["core:AdminPassword"],
            "cadre-users": {0: "exampleauth:UserPass", **users},
        }
        (folder / "authsources.php").write_text(f"<?php\n$config = {_php(sources)};\n")
        hosted = {
            "host": "__DEFAULT__",
            "privatekey": "idp.key",
            "certificate": "idp.crt",
            "auth": "cadre-users",
            "signature.algorithm": "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
            # The assertion is signed, the Response around it is not: Cadre must find and check
            # the signature inside the (decrypted) assertion.
            "saml20.sign.assertion": True,
            "saml20.sign.response": False,
            # What this IdP requires of Cadre's SP: signed AuthnRequests and logout messages,
            # assertions encrypted to the SP's encryption key from its metadata.
            "validate.authnrequest": True,
            "validate.logout": True,
            "sign.logout": True,
            "assertion.encryption": self.encrypt_assertions,
            "SingleLogoutServiceBinding": [
                "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect",
                "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST",
            ],
            "NameIDFormat": "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent",
            "attributes.NameFormat": "urn:oasis:names:tc:SAML:2.0:attrname-format:basic",
            "authproc": {
                # The persistent NameID is the user's uid attribute.
                10: {
                    "class": "saml:AttributeNameID",
                    "attribute": "uid",
                    "Format": "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent",
                }
            },
        }
        (folder / "metadata" / "saml20-idp-hosted.php").write_text(
            f"<?php\n$metadata[{_php(self.entity_id)}] = {_php(hosted)};\n"
        )
        (folder / "metadata" / "saml20-sp-remote.php").write_text("<?php\n")

    def sp_metadata(self, xml: str) -> None:
        """Cadre's SP metadata as SimpleSAMLphp should know it (an XML metadata source)."""
        path = self._folder / "metadata" / "cadre-sp.xml"
        path.write_text(
            xml
            or '<?xml version="1.0"?><md:EntitiesDescriptor '
            'xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"/>'
        )

    # --- process ----------------------------------------------------------------------------

    def __enter__(self) -> SimpleSamlPhp:
        self._write_config()
        environment = {**os.environ, "SIMPLESAMLPHP_CONFIG_DIR": str(self._folder)}
        self._process = subprocess.Popen(
            [PHP, "-S", f"127.0.0.1:{self.port}", "-t", str(SIMPLESAMLPHP / "www")],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=open(self._folder / "log" / "php-server.log", "wb"),
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                answer = httpx.get(self.entity_id, timeout=2)
                if answer.status_code == 200 and "EntityDescriptor" in answer.text:
                    break
            except httpx.HTTPError:
                pass
            if self._process.poll() is not None or time.monotonic() > deadline:
                log = self.log()
                self.__exit__(None, None, None)
                raise RuntimeError(f"SimpleSAMLphp did not start: {log[-3000:]}")
            time.sleep(0.1)
        return self

    def __exit__(self, *exc_info) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._folder, ignore_errors=True)

    def log(self) -> str:
        parts = []
        for name in ("simplesamlphp.log", "php-server.log"):
            path = self._folder / "log" / name
            if path.exists():
                parts.append(path.read_text(errors="replace"))
        return "\n".join(parts)

    def metadata(self) -> str:
        return httpx.get(self.entity_id, timeout=10).text

    # --- the browser at the IdP -------------------------------------------------------------

    @staticmethod
    def form(page: str) -> dict:
        """The auto-submitting form SimpleSAMLphp hands the browser (the one carrying a SAML
        message, not the language selector): action and fields."""
        for action, body in re.findall(r'<form[^>]*action="([^"]+)"[^>]*>(.*?)</form>', page, re.S):
            if 'name="SAML' in body:
                fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', body)
                return {
                    "action": html.unescape(action),
                    **{name: html.unescape(value) for name, value in fields},
                }
        raise AssertionError(f"no SAML form in the page: {page[:2000]}")

    def sign_in(self, browser: httpx.Client, authorize_url: str, login: str) -> dict:
        """Follow Cadre's AuthnRequest URL to the login page, sign in as `login`; returns the
        form SimpleSAMLphp posts to Cadre's ACS (action, SAMLResponse, RelayState)."""
        page = browser.get(authorize_url, follow_redirects=True)
        assert page.status_code == 200, (page.status_code, page.text[:2000], self.log()[-3000:])
        auth_state = re.search(r'name="AuthState" value="([^"]+)"', page.text)
        assert auth_state, (page.text[:3000], self.log()[-3000:])
        signed_in = browser.post(
            str(page.url).split("?")[0],
            data={
                "AuthState": html.unescape(auth_state.group(1)),
                "username": login,
                "password": self.users[login]["password"],
            },
            follow_redirects=True,
        )
        assert signed_in.status_code == 200, (signed_in.text[:2000], self.log()[-3000:])
        assert "errorreport.php" not in signed_in.text, self.errors()
        return self.form(signed_in.text)

    def errors(self) -> str:
        """SimpleSAMLphp's logged errors (what an assertion message should show)."""
        return "\n".join(line for line in self.log().splitlines() if " ERROR " in line)[-4000:]
