"""Memory packs: one tenant's pages, facts and audit trail in a portable, versioned file
(docs/portability.md). One writer (`PackWriter`) and one reader (`PackReader`) of the format that
`fleetmem.pack_format` describes; `fleetmem.pack_transfer` exports a tenant into a pack and imports
one through the store ports.

Import treats a pack as untrusted input: the whole pack is read and checked first (members,
checksums, counts, every line against its model and the verbs' own limits), and nothing is
written unless all of it passes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from fleetmem.pack_format import (
    FACTS,
    FORMAT,
    FORMAT_VERSION,
    ITEM_MODELS,
    LINE_MAX_BYTES,
    MANIFEST,
    MANIFEST_MAX_BYTES,
    MEMBERS,
    PAGES,
    PROBLEMS,
    PROGRESS_EVERY,
    Manifest,
    MemberInfo,
    PackError,
    PackFilter,
    PackModel,
)

# --------------------------------------------------------------------------- writer


class PackWriter:
    """Writes a pack: items are spooled to one temporary file per member (hashed as they go, so
    memory stays bounded), then the tar is assembled manifest first and moved into place."""

    def __init__(self, path: Path, *, tenant: str, filter: PackFilter, now: datetime) -> None:
        self.path = path
        self.tenant = tenant
        self.filter = filter
        self.now = now
        self._dir = tempfile.TemporaryDirectory(prefix=".fmpack-", dir=path.parent)
        self._files: dict[str, IO[bytes]] = {m: open(Path(self._dir.name) / m, "wb") for m in MEMBERS}
        self._hash = {m: hashlib.sha256() for m in MEMBERS}
        self.counts = dict.fromkeys(MEMBERS, 0)
        self._bytes = dict.fromkeys(MEMBERS, 0)

    def add(self, member: str, item: PackModel) -> None:
        line = item.model_dump_json().encode("utf-8") + b"\n"
        self._files[member].write(line)
        self._hash[member].update(line)
        self._bytes[member] += len(line)
        self.counts[member] += 1

    def finish(self) -> Manifest:
        from fleetmem import __version__

        for f in self._files.values():
            f.close()
        manifest = Manifest(
            format=FORMAT,
            format_version=FORMAT_VERSION,
            tenant=self.tenant,
            exported_at=self.now,
            fleetmem_version=__version__,
            filter=self.filter,
            members={
                m: MemberInfo(count=self.counts[m], bytes=self._bytes[m], sha256=self._hash[m].hexdigest())  # type: ignore[misc]
                for m in MEMBERS
            },
        )
        part = Path(self._dir.name) / "pack.part"
        with tarfile.open(part, "w:gz") as tar:
            data = manifest.model_dump_json(indent=2).encode("utf-8") + b"\n"
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime, info.mode = len(data), int(self.now.timestamp()), 0o600
            tar.addfile(info, io.BytesIO(data))
            for m in MEMBERS:
                info = tarfile.TarInfo(m)
                info.size, info.mtime, info.mode = self._bytes[m], int(self.now.timestamp()), 0o600
                with open(Path(self._dir.name) / m, "rb") as f:
                    tar.addfile(info, f)
        os.chmod(part, 0o600)
        os.replace(part, self.path)
        return manifest

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._dir.cleanup()

    def __enter__(self) -> PackWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- reader

_DAMAGED_FIX = "Export the pack again (or copy it again in full); a pack is checked whole before anything is written."


class PackReader:
    """Reads a pack as untrusted input. Opening checks the member list and the manifest;
    `verify()` checks every member against the manifest and every line against its model and the
    verbs' limits; `items(member)` yields the validated items again, for writing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Both passes read one private copy: a file changed after it was checked is never written.
        self._copy = tempfile.TemporaryFile()
        try:
            self._load()
        except BaseException:
            self._copy.close()
            raise

    def _load(self) -> None:
        path = self.path
        try:
            with open(path, "rb") as src:
                shutil.copyfileobj(src, self._copy)
            self._copy.seek(0)
            self._tar = tarfile.open(fileobj=self._copy, mode="r:*")
            names = self._members()
        except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
            raise PackError(
                f"{path} is not a readable fleetmem pack ({type(exc).__name__}: {exc}); nothing was written.",
                _DAMAGED_FIX,
            ) from None
        if names[:1] != [MANIFEST] or sorted(names[1:]) != sorted(MEMBERS) or len(names) != len(MEMBERS) + 1:
            raise PackError(
                f"{path} does not hold the members of a fleetmem pack (found {names[:8]}; expected "
                f"{[MANIFEST, *MEMBERS]}); nothing was written.",
                _DAMAGED_FIX,
            )
        self.manifest = self._read_manifest()

    def _members(self) -> list[str]:
        names: list[str] = []
        for info in self._tar.getmembers():
            if not info.isfile():
                raise PackError(
                    f"{self.path}: member {info.name!r} is not a regular file; nothing was written.", _DAMAGED_FIX
                )
            names.append(info.name)
        return names

    def _open(self, name: str) -> IO[bytes]:
        f = self._tar.extractfile(name)
        assert f is not None  # regular files only (checked when opened)
        return f

    def _read_manifest(self) -> Manifest:
        try:
            raw = self._open(MANIFEST).read(MANIFEST_MAX_BYTES + 1)
        except (tarfile.TarError, EOFError, OSError, Exception) as exc:  # zlib.error on a damaged stream
            raise PackError(
                f"{self.path}: the manifest cannot be read ({type(exc).__name__}); nothing was written.", _DAMAGED_FIX
            ) from None
        if len(raw) > MANIFEST_MAX_BYTES:
            raise PackError(f"{self.path}: manifest.json is larger than {MANIFEST_MAX_BYTES // 1024} KB.", _DAMAGED_FIX)
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            raise PackError(f"{self.path}: manifest.json is not JSON; nothing was written.", _DAMAGED_FIX) from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise PackError(
                f"{self.path}: manifest.json does not name the format {FORMAT!r}; this is not a fleetmem "
                "pack. Nothing was written.",
                "Pass a file written by `fleetmem export`.",
            )
        version = doc.get("format_version")
        if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
            raise PackError(
                f"{self.path} is a version {version} pack; this fleetmem reads packs up to version "
                f"{FORMAT_VERSION}. Nothing was written.",
                "Upgrade fleetmem (pip install --upgrade fleetmem) on this machine, then import again; or export "
                "the pack again with this machine's fleetmem version.",
            )
        try:
            return Manifest.model_validate_json(raw)
        except ValidationError as exc:
            raise PackError(
                f"{self.path}: manifest.json: {_first_error(exc)}; nothing was written.", _DAMAGED_FIX
            ) from None

    def _lines(self, member: str) -> Iterator[tuple[int, bytes]]:
        """(line number, line) of a member, each at most LINE_MAX_BYTES; the damaged-stream errors
        of a truncated file become PackError."""
        f = self._open(member)
        n = 0
        try:
            while True:
                line = f.readline(LINE_MAX_BYTES + 1)
                if not line:
                    return
                n += 1
                if len(line) > LINE_MAX_BYTES and not line.endswith(b"\n"):
                    raise PackError(
                        f"{self.path}: {member} line {n} is longer than {LINE_MAX_BYTES // 1024} KB; "
                        "nothing was written.",
                        "Remove the oversized item from the pack, or export it again.",
                    )
                yield n, line
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise PackError(
                f"{self.path} is truncated or damaged in {member} after line {n} "
                f"({type(exc).__name__}); nothing was written.",
                _DAMAGED_FIX,
            ) from None
        except Exception as exc:  # zlib.error and friends from a damaged gzip stream
            if isinstance(exc, PackError):
                raise
            raise PackError(
                f"{self.path} is damaged in {member} after line {n} ({type(exc).__name__}); nothing was written.",
                _DAMAGED_FIX,
            ) from None

    def _parse(self, member: str, n: int, line: bytes) -> Any:
        where = f"{self.path}: {member} line {n}"
        try:
            item = ITEM_MODELS[member].model_validate_json(line)
        except ValidationError as exc:
            raise PackError(
                f"{where}: {_first_error(exc)}; nothing was written.",
                "Correct or remove that line (a pack holds only the fields docs/portability.md lists), "
                "or export the pack again.",
            ) from None
        problem = PROBLEMS[member](item)
        if problem:
            raise PackError(
                f"{where}: {problem}; nothing was written.",
                "The verbs refuse such an item too: shorten or correct it in the pack, or leave it out.",
            )
        return item

    def verify(self, progress: Callable[[str, int], None] | None = None) -> dict[str, int]:
        """Check every member against the manifest (size, count, SHA-256) and every line against its
        model and the verbs' limits. Raises PackError naming the first problem."""
        for member in MEMBERS:
            info = self.manifest.members.get(member)  # type: ignore[call-overload]
            if info is None:
                raise PackError(f"{self.path}: the manifest lists no checksum for {member}.", _DAMAGED_FIX)
            digest, size, count = hashlib.sha256(), 0, 0
            seen: set[bytes] = set()  # 8-byte digests of the keys: bounded even for large packs
            for n, line in self._lines(member):
                digest.update(line)
                size += len(line)
                count = n
                item = self._parse(member, n, line)
                key = _key(member, item)
                if key is not None:
                    mark = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
                    if mark in seen:
                        raise PackError(
                            f"{self.path}: {member} line {n}: {key!r} appears twice in the pack; nothing was written.",
                            "A pack holds each page and fact once: export it again.",
                        )
                    seen.add(mark)
                if progress and n % PROGRESS_EVERY == 0:
                    progress(member, n)
            if digest.hexdigest() != info.sha256 or size != info.bytes or count != info.count:
                raise PackError(
                    f"{self.path}: {member} does not match its checksum in the manifest (expected {info.count} lines, "
                    f"{info.bytes} bytes, sha256 {info.sha256[:12]}…; found {count} lines, {size} bytes, sha256 "
                    f"{digest.hexdigest()[:12]}…): the file was changed or damaged. Nothing was written.",
                    _DAMAGED_FIX,
                )
        return {m: self.manifest.members[m].count for m in MEMBERS}  # type: ignore[index]

    def items(self, member: str) -> Iterator[Any]:
        for n, line in self._lines(member):
            yield self._parse(member, n, line)

    def close(self) -> None:
        self._tar.close()
        self._copy.close()

    def __enter__(self) -> PackReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _key(member: str, item: Any) -> str | None:
    """What must be unique within a member: a page's slug, a fact's id (audit events may repeat)."""
    if member == PAGES:
        return str(item.slug)
    if member == FACTS:
        return str(item.fact_id)
    return None


def _first_error(exc: ValidationError) -> str:
    e = exc.errors()[0]
    where = ".".join(str(p) for p in e.get("loc", ())) or "the line"
    if e.get("type") == "extra_forbidden":
        return f"unknown field {where!r} (not part of pack format {FORMAT_VERSION})"
    return f"{where}: {e.get('msg')}"
