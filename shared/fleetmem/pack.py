"""Memory packs: one tenant's pages, facts and audit trail in a portable, versioned file
(docs/portability.md). The format, one writer (`PackWriter`) and one reader (`PackReader`);
`fleetmem.pack_transfer` exports a tenant into a pack and imports one through the store ports.

A pack is a gzip-compressed tar (stdlib `tarfile`) of four members, in this order:
`manifest.json` (format, version, tenant, filter, and per data member its line count, byte size
and SHA-256), then `pages.jsonl`, `facts.jsonl` and `audit.jsonl`, one JSON object per line,
described by the strict models below (`extra="forbid"`: an unknown field is refused). Never in a
pack: tokens, token hashes, cursors, idempotency records, vectors (re-embedded on import).

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
from typing import IO, Annotated, Any, Final, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from fleetmem.errors import VerbError
from fleetmem.memory.slugs import is_canonical_slug, is_path_like, slug_size_problem
from fleetmem.models import AuditEvent, Fact, Link, Page, TimelineEntry
from fleetmem.protocol import (
    FACT_MAX,
    PAGE_BODY_MAX_BYTES,
    PROVENANCE_MAX,
    SESSION_ID_MAX,
    TITLE_MAX,
    FactKind,
    Visibility,
)
from fleetmem.timefmt import parse_iso, to_ms

FORMAT: Final = "fleetmem-pack"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PAGES, FACTS, AUDIT = "pages.jsonl", "facts.jsonl", "audit.jsonl"
MEMBERS = (PAGES, FACTS, AUDIT)
#: The longest line a reader accepts: above the largest page a store keeps (384 KB), with room
#: for JSON escaping. A longer line is refused before it is parsed.
LINE_MAX_BYTES = 2 * 1024 * 1024
MANIFEST_MAX_BYTES = 64 * 1024
#: Ids, client names and audit subjects: what the stores and verbs produce, with room to spare.
ID_MAX = 200
DETAIL_MAX_BYTES = 16 * 1024
BATCH = 200
#: Progress goes to stderr every this many items of a member.
PROGRESS_EVERY = 5000

States = Literal["active", "forgotten", "superseded", "expired"]


class PackError(Exception):
    """A pack that cannot be read or imported: `message` says what and where, `fix` what to do."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


# --------------------------------------------------------------------------- the format


def _ms(value: datetime) -> datetime:
    return to_ms(value)


Stamp = Annotated[AwareDatetime, AfterValidator(_ms)]
Id = Annotated[str, Field(min_length=1, max_length=ID_MAX, pattern=r"^\S+$")]


class PackModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PackLink(PackModel):
    type: Annotated[str, Field(min_length=1, max_length=TITLE_MAX)]
    target: str
    context: Annotated[str, Field(max_length=PROVENANCE_MAX)] | None = None


class PackTimelineEntry(PackModel):
    date: Annotated[str, Field(min_length=1, max_length=64)]
    text: Annotated[str, Field(max_length=FACT_MAX)]


class PackPage(PackModel):
    """A page, whole (pages.jsonl)."""

    slug: str
    title: str
    type: Annotated[str, Field(max_length=TITLE_MAX)] | None = None
    aliases: list[str] = []
    summary: Annotated[str, Field(max_length=FACT_MAX)] | None = None
    visibility: Visibility = "world"
    body: str = ""
    links: list[PackLink] = []
    timeline: list[PackTimelineEntry] = []
    frontmatter: dict[str, Any] = {}
    created_at: Stamp
    updated_at: Stamp
    last_retrieved_at: Stamp | None = None
    author: Id | None = None

    @classmethod
    def of(cls, page: Page) -> PackPage:
        return cls.model_validate(page.model_dump(exclude={"tenant"}), strict=False)

    def to_page(self, tenant: str) -> Page:
        return Page(
            tenant=tenant,
            **self.model_dump(exclude={"links", "timeline", "aliases"}),
            aliases=tuple(self.aliases),
            links=tuple(Link(**x.model_dump()) for x in self.links),
            timeline=tuple(TimelineEntry(**t.model_dump()) for t in self.timeline),
        )


class PackFact(PackModel):
    """A fact with its full state and lineage (facts.jsonl)."""

    fact_id: Id
    seq: Annotated[int, Field(ge=1, le=2**62)]
    text: str
    kind: FactKind = "fact"
    entity_slug: str | None = None
    provenance: str
    visibility: Visibility = "world"
    session_id: Annotated[str, Field(max_length=SESSION_ID_MAX)] | None = None
    client_id: Id
    created_at: Stamp
    valid_until: Stamp | None = None
    expired_at: Stamp | None = None
    expired_reason: Annotated[str, Field(max_length=PROVENANCE_MAX)] | None = None
    expired_by: Id | None = None
    superseded_by: Id | None = None
    supersedes: Id | None = None

    @classmethod
    def of(cls, fact: Fact) -> PackFact:
        return cls.model_validate(fact.model_dump(exclude={"tenant", "vector", "vector_model"}), strict=False)

    def to_fact(self, tenant: str) -> Fact:
        return Fact(tenant=tenant, **self.model_dump())


class PackAuditEvent(PackModel):
    """One audit event (audit.jsonl), in the order the trail was written."""

    subject: Annotated[str, Field(min_length=1, max_length=ID_MAX + 100)]
    action: Literal["write", "supersede", "expire", "purge", "put_page", "delete_page"]
    actor: Id
    at: Stamp
    reason: Annotated[str, Field(max_length=PROVENANCE_MAX)] | None = None
    provenance: Annotated[str, Field(max_length=PROVENANCE_MAX)] | None = None
    detail: dict[str, Any] = {}

    @classmethod
    def of(cls, event: AuditEvent) -> PackAuditEvent:
        return cls.model_validate(event.model_dump(exclude={"tenant"}), strict=False)

    def to_event(self, tenant: str) -> AuditEvent:
        return AuditEvent(tenant=tenant, **self.model_dump())


class PackFilter(PackModel):
    """What an export selected (None: everything)."""

    entity: str | None = None
    since: Stamp | None = None
    state: States | None = None


class MemberInfo(PackModel):
    count: Annotated[int, Field(ge=0)]
    bytes: Annotated[int, Field(ge=0)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Manifest(PackModel):
    format: Literal["fleetmem-pack"]
    format_version: Annotated[int, Field(ge=1)]
    tenant: Annotated[str, Field(min_length=1, max_length=ID_MAX)]
    exported_at: Stamp
    fleetmem_version: str
    filter: PackFilter
    members: dict[Literal["pages.jsonl", "facts.jsonl", "audit.jsonl"], MemberInfo]


ITEM_MODELS: dict[str, type[PackModel]] = {PAGES: PackPage, FACTS: PackFact, AUDIT: PackAuditEvent}


# --------------------------------------------------------------------------- the verbs' limits


def _slug_problem(slug: str) -> str | None:
    if is_path_like(slug) or not is_canonical_slug(slug):
        return f"{slug[:80]!r} is not a page slug (lowercase words and '-' per '/' segment)"
    return slug_size_problem(slug)


def _page_problem(p: PackPage) -> str | None:
    """put_page's limits (D16), the same functions it calls."""
    from fleetmem.memory.page_limits import PAGE_STORED_MAX_BYTES, stored_bytes
    from fleetmem.memory.page_limits import check_names as _check_names

    problem = _slug_problem(p.slug)
    if problem:
        return f"slug: {problem}"
    if not p.title.strip():
        return "title is empty"
    try:
        _check_names(p.slug, p.title, tuple(p.aliases))
    except VerbError as exc:
        return str(exc)
    if len(p.body.encode("utf-8")) > PAGE_BODY_MAX_BYTES:
        return f"the body is larger than {PAGE_BODY_MAX_BYTES // 1024} KB"
    for link in p.links:
        problem = _slug_problem(link.target)
        if problem:
            return f"link target: {problem}"
    for entry in p.timeline:
        try:
            parse_iso(entry.date)
        except (ValueError, OverflowError):
            return f"timeline date {entry.date!r} is not an ISO 8601 date"
    if p.updated_at < p.created_at:
        return "updated_at is before created_at"
    size = stored_bytes(p.to_page("-"))
    if size > PAGE_STORED_MAX_BYTES:
        return f"the page takes {size // 1024} KB as stored; a page holds at most {PAGE_STORED_MAX_BYTES // 1024} KB"
    return None


def _fact_problem(f: PackFact) -> str | None:
    """remember's limits (D16) and the lineage a stored fact can have."""
    if not f.text.strip():
        return "fact text is empty"
    if len(f.text) > FACT_MAX:
        return f"fact text is longer than {FACT_MAX} characters ({len(f.text)})"
    if not f.provenance.strip():
        return "provenance is blank"
    if len(f.provenance) > PROVENANCE_MAX:
        return f"provenance is longer than {PROVENANCE_MAX} characters"
    if f.entity_slug is not None:
        problem = _slug_problem(f.entity_slug)
        if problem:
            return f"entity_slug: {problem}"
    if f.superseded_by is not None and f.expired_at is None:
        return "a superseded fact needs expired_at (when it was superseded)"
    if f.superseded_by == f.fact_id or f.supersedes == f.fact_id:
        return "a fact cannot supersede itself"
    return None


def _audit_problem(e: PackAuditEvent) -> str | None:
    if len(json.dumps(e.detail, ensure_ascii=False, default=str).encode("utf-8")) > DETAIL_MAX_BYTES:
        return f"detail is larger than {DETAIL_MAX_BYTES // 1024} KB"
    return None


PROBLEMS: dict[str, Callable[[Any], str | None]] = {PAGES: _page_problem, FACTS: _fact_problem, AUDIT: _audit_problem}


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
