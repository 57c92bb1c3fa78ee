"""Safe bundles: every unsafe case is refused with a clear reason; nothing escapes a temp dir."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from hub.bundles import (
    BundleLimits,
    UnsafeBundle,
    bundle_from_directory,
    bundle_from_files,
    collation_key,
    extracted,
    fingerprint,
    read_bundle,
    write_zip,
)
from hub.tests.skill_samples import make_tar_gz, make_zip, skill_files


def refused(data: bytes, reason: str, limits: BundleLimits | None = None) -> UnsafeBundle:
    with pytest.raises(UnsafeBundle) as caught:
        read_bundle(data, **({"limits": limits} if limits else {}))
    assert caught.value.details["reason"] == reason, caught.value.message
    assert caught.value.status == 400 and caught.value.code == "unsafe_bundle"
    return caught.value


@pytest.mark.parametrize("maker", [make_zip, make_tar_gz])
def test_zip_and_tar_gz_read_the_same_files(maker):
    bundle = read_bundle(maker(skill_files()))
    assert [f.path for f in bundle.files] == ["references/guide.md", "scripts/merge.py", "SKILL.md"]
    assert bundle.get("SKILL.md").content.startswith(b"---\nname: pdf-tools")
    assert bundle.folder_name is None


@pytest.mark.parametrize("maker", [make_zip, make_tar_gz])
def test_single_top_folder_is_stripped_and_named(maker):
    bundle = read_bundle(maker(skill_files(), prefix="pdf-tools/"))
    assert bundle.folder_name == "pdf-tools"
    assert bundle.get("SKILL.md") is not None


@pytest.mark.parametrize("maker", [make_zip, make_tar_gz])
@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../evil.sh", "path_traversal"),
        ("scripts/../../evil.sh", "path_traversal"),
        ("/etc/cron.d/evil", "absolute_path"),
        ("C:/Windows/evil", "absolute_path"),
        ("scripts\\evil.sh", "bad_name"),
        ("scripts/ev\x01il", "bad_name"),
    ],
)
def test_path_escapes_are_refused(maker, path, reason):
    files = skill_files() | {path: b"x"}
    error = refused(maker(files), reason)
    assert error.details["path"]


def tar_with_raw_names(files: dict[str, bytes], tar_format: int) -> bytes:
    """A tar whose names are written as given: surrogate escapes become the raw bytes they
    stand for (`\\udcff` is the byte 0xff), as a tool on a non-UTF-8 system writes them."""
    buffer = io.BytesIO()
    with tarfile.open(
        fileobj=buffer, mode="w", format=tar_format, encoding="utf-8", errors="surrogateescape"
    ) as archive:
        for path, content in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@pytest.mark.parametrize("tar_format", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT])
@pytest.mark.parametrize("path", ["scripts/\udcff\udcfe.py", "pdf-tools/\udced\udca0\udc80.md"])
def test_tar_names_that_are_not_utf8_are_refused(tar_format, path):
    files = {f"pdf-tools/{name}": content for name, content in skill_files().items()}
    error = refused(tar_with_raw_names(files | {path: b"x\n"}, tar_format), "bad_name")
    # The name is shown escaped: the refusal itself must survive JSON and a UTF-8 response.
    assert "\\udc" in error.details["path"] and "\\udc" in error.message
    json.dumps(error.details, ensure_ascii=False).encode("utf-8")


def test_zip_names_that_are_not_utf8_are_refused():
    # A zip that flags its names as UTF-8 but holds other bytes, and a per-file upload's path
    # spelling a lone surrogate (JSON's "\\udcff").
    data = make_zip(skill_files() | {"scripts/\u00e9.py": b"x"})
    refused(data.replace("\u00e9".encode(), b"\xff\xfe"), "corrupt_archive")
    with pytest.raises(UnsafeBundle) as caught:
        bundle_from_files(skill_files() | {"scripts/\udcff.py": b"x"})
    assert caught.value.details == {"reason": "bad_name", "path": "scripts/\\udcff.py"}


def test_zip_symlink_is_refused():
    refused(make_zip(skill_files(), symlinks={"scripts/link": "/etc/passwd"}), "symlink")


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        (tarfile.SYMTYPE, "symlink"),
        (tarfile.LNKTYPE, "hardlink"),
        (tarfile.CHRTYPE, "special_file"),
        (tarfile.BLKTYPE, "special_file"),
        (tarfile.FIFOTYPE, "special_file"),
    ],
)
def test_tar_links_and_devices_are_refused(kind, reason):
    member = tarfile.TarInfo("scripts/odd")
    member.type = kind
    member.linkname = "/etc/passwd"
    refused(make_tar_gz(skill_files(), members=[member]), reason)


@pytest.mark.parametrize("maker", [make_zip, make_tar_gz])
def test_size_limits(maker):
    limits = BundleLimits(max_files=3, max_file_bytes=100, max_total_bytes=150)
    refused(maker({"SKILL.md": b"x" * 101}), "file_too_large", limits)
    refused(maker({"a.md": b"x" * 90, "b.md": b"x" * 90}), "bundle_too_large", limits)
    refused(maker({f"f{i}.md": b"x" for i in range(4)}), "too_many_files", limits)


def test_default_limits_refuse_a_file_over_one_mebibyte():
    files = skill_files() | {"assets/big.bin": bytes(range(256)) * 4097}
    refused(make_zip(files), "file_too_large")


def test_archive_over_the_upload_limit_is_refused():
    refused(b"PK\x03\x04" + b"\0" * 200, "archive_too_large", BundleLimits(max_archive_bytes=100))


def test_zip_bomb_by_ratio_is_refused():
    refused(make_zip({"SKILL.md": b"\0" * (900 * 1024)}), "compression_ratio")


def test_tar_gz_bomb_is_refused_before_it_is_unpacked():
    limits = BundleLimits(max_total_bytes=64 * 1024, max_files=4)
    payload = make_tar_gz({"SKILL.md": b"\0" * (2 * 1024 * 1024)})
    refused(payload, "compression_ratio", limits)


def test_zip_member_lying_about_its_size_is_refused():
    data = bytearray(make_zip({"SKILL.md": b"hello world, a skill file" * 4}))
    # Lower the declared uncompressed size in the central directory (offset 24 of the entry).
    central = data.rfind(b"PK\x01\x02")
    data[central + 24 : central + 28] = (10).to_bytes(4, "little")
    # zipfile stops at the declared size, so the CRC no longer matches: refused either way.
    with pytest.raises(UnsafeBundle) as caught:
        read_bundle(bytes(data))
    assert caught.value.details["reason"] in {"size_mismatch", "corrupt_archive"}
    assert caught.value.details["path"] == "SKILL.md"


def test_duplicate_paths_are_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SKILL.md", b"a")
        with pytest.warns(UserWarning):
            archive.writestr("SKILL.md", b"b")
    refused(buffer.getvalue(), "duplicate_path")
    refused(make_zip({"SKILL.md": b"a", "skill.MD": b"b"}), "duplicate_path")


def test_encrypted_zip_member_is_refused():
    data = bytearray(make_zip({"SKILL.md": b"secret"}))
    central = data.rfind(b"PK\x01\x02")
    data[central + 8] |= 0x1  # general purpose flag: encrypted
    data[6] |= 0x1
    refused(bytes(data), "encrypted")


def test_garbage_and_unknown_formats_are_refused():
    refused(b"not an archive at all", "unsupported_format")
    refused(b"PK\x03\x04garbage", "corrupt_archive")
    refused(b"\x1f\x8bgarbage", "corrupt_archive")


def test_empty_bundle_is_refused():
    refused(make_zip({}), "empty")


def test_dot_paths_and_macos_junk_are_ignored():
    files = skill_files() | {".git/config": b"x", "__MACOSX/._SKILL.md": b"x", ".env": b"K=V"}
    bundle = read_bundle(make_zip(files))
    assert sorted(bundle.ignored) == [".env", ".git/config", "__MACOSX/._SKILL.md"]
    assert all(not f.path.startswith((".", "__MACOSX")) for f in bundle.files)


def test_extraction_stays_inside_a_temporary_directory():
    bundle = read_bundle(make_zip(skill_files()))
    with extracted(bundle, "pdf-tools") as folder:
        assert folder.name == "pdf-tools"
        written = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        assert written == ["SKILL.md", "references/guide.md", "scripts/merge.py"]
    assert not folder.exists()


def test_directory_with_a_symlink_is_refused(tmp_path):
    root = tmp_path / "pdf-tools"
    root.mkdir()
    for path, content in skill_files().items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)
    bundle = bundle_from_directory(root)
    assert bundle.folder_name == "pdf-tools" and len(bundle.files) == 3
    (root / "scripts" / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(UnsafeBundle) as caught:
        bundle_from_directory(root)
    assert caught.value.details["reason"] == "symlink"


def test_written_zip_reads_back_to_the_same_fingerprint_every_time():
    bundle = read_bundle(make_tar_gz(skill_files()))
    first, second = write_zip(bundle), write_zip(bundle)
    assert first == second
    assert read_bundle(first).fingerprint == bundle.fingerprint


def test_fingerprint_definition():
    entries = [("b.md", "2" * 64), ("SKILL.md", "1" * 64), (".hidden", "3" * 64)]
    expected = hashlib.sha256(f"b.md:{'2' * 64}\nSKILL.md:{'1' * 64}".encode()).hexdigest()
    assert fingerprint(entries) == expected
    assert fingerprint(reversed(entries)) == expected


def test_fingerprint_changes_with_any_byte():
    bundle = read_bundle(make_zip(skill_files()))
    tampered = read_bundle(make_zip(skill_files() | {"references/guide.md": b"# Guide!\n"}))
    assert bundle.fingerprint != tampered.fingerprint


TRICKY_PATHS = [
    "SKILL.md",
    "skill-notes.md",
    "Skill.md",
    "scripts/run.sh",
    "scripts/Run.sh",
    "scripts/run_2.sh",
    "scripts/run-2.sh",
    "scripts/run.2.sh",
    "references/a.md",
    "references/A.md",
    "a/b.md",
    "a-b.md",
    "a_b.md",
    "a.md",
    "ab.md",
    "a0.md",
    "assets/logo.png",
    "assets/Logo~1.png",
    "x$y.md",
    "x+y.md",
]


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_sort_order_matches_javascript_locale_compare(tmp_path):
    script = (
        "const p = JSON.parse(process.argv[1]);"
        "console.log(JSON.stringify(p.sort((a, b) => a.localeCompare(b))));"
    )
    result = subprocess.run(
        ["node", "-e", script, json.dumps(TRICKY_PATHS)], capture_output=True, text=True, check=True
    )
    assert sorted(TRICKY_PATHS, key=collation_key) == json.loads(result.stdout)


CLAWHUB_SKILLS = (
    Path(__file__).parent / "clawhub" / "node_modules" / "clawhub" / "dist" / "skills.js"
)


@pytest.mark.skipif(
    not CLAWHUB_SKILLS.exists(), reason="clawhub is not installed (npm ci in hub/tests/clawhub)"
)
def test_fingerprint_equals_the_clawhub_cli_fingerprint():
    files = {path: f"content of {path}\n".encode() for path in TRICKY_PATHS}
    payload = [{"path": p, "sha256": hashlib.sha256(c).hexdigest()} for p, c in files.items()]
    script = (
        f"import('{CLAWHUB_SKILLS.as_uri()}').then(m => "
        "console.log(m.buildSkillFingerprint(JSON.parse(process.argv[1]))))"
    )
    result = subprocess.run(
        ["node", "-e", script, json.dumps(payload)], capture_output=True, text=True, check=True
    )
    assert fingerprint((e["path"], e["sha256"]) for e in payload) == result.stdout.strip()
