"""Sample skills and archive builders for the Hub tests (raw bytes, no Cadre code)."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile


def skill_md(
    name: str = "pdf-tools",
    description: str = "Fill and merge PDF forms.",
    body: str = "# PDF tools\n\nUse pypdf to merge files.\n",
    extra: str = "",
) -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}".encode()


def skill_files(name: str = "pdf-tools", **kwargs) -> dict[str, bytes]:
    return {
        "SKILL.md": skill_md(name, **kwargs),
        "scripts/merge.py": b"import sys\nprint(sys.argv)\n",
        "references/guide.md": b"# Guide\n",
    }


def make_zip(
    files: dict[str, bytes], *, prefix: str = "", symlinks: dict[str, str] | None = None
) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, content in files.items():
            archive.writestr(prefix + path, content)
        for path, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(prefix + path)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return buffer.getvalue()


def make_tar_gz(
    files: dict[str, bytes], *, prefix: str = "", members: list[tarfile.TarInfo] | None = None
) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, content in files.items():
            info = tarfile.TarInfo(prefix + path)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
        for info in members or []:
            archive.addfile(info)
    return buffer.getvalue()
