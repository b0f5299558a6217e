"""Export a tenant into a memory pack and import one into a tenant (docs/portability.md), through
the store ports; the pack format, its writer and reader are `fleetmem.pack`.

Import writes only a pack `PackReader.verify()` has passed. Writing keeps ids, seqs, states, lineage
and timestamps; every item is written through the store ports, so each gets a change number like any
write and delta followers see it. Writing is idempotent item by item (an item already stored is left
as it is), so a second import changes nothing and an interrupted one is completed by running it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetmem.memory import indexing
from fleetmem.models import AuditEvent, Fact, FactStatus, Page
from fleetmem.pack import PackReader, PackWriter
from fleetmem.pack_format import (
    AUDIT,
    BATCH,
    FACTS,
    MEMBERS,
    PAGES,
    PROGRESS_EVERY,
    Manifest,
    PackAuditEvent,
    PackError,
    PackFact,
    PackFilter,
    PackModel,
    PackPage,
)
from fleetmem.ports import AuditLog, AuditScan, Deps, FactScan, FactStore, PageScan, PageStore
from fleetmem.timefmt import iso


def fact_state(f: Fact, now: datetime) -> FactStatus:
    from fleetmem.memory.verbs.recall import fact_status

    return fact_status(f, now)["status"]


def _scan(store: Any, tenant: str) -> Iterator[Any]:
    after: str | None = None
    while True:
        batch, after = store.scan(tenant, after=after, limit=BATCH)
        yield from batch
        if after is None:
            return


def _portable(pages: PageStore, facts: FactStore, audit: AuditLog) -> tuple[PageScan, FactScan, AuditScan]:
    if not (isinstance(pages, PageScan) and isinstance(facts, FactScan) and isinstance(audit, AuditScan)):
        raise PackError(
            "This backend's stores cannot read a whole tenant yet, so no pack can be exported from or imported "
            "into it.",
            "Export from (or import into) a local data directory: --data-dir DIR.",
        )
    return pages, facts, audit


def export_pack(
    path: Path,
    deps: Deps,
    *,
    tenant: str,
    filter: PackFilter,
    progress: Callable[[str, int], None] | None = None,
    world_only: bool = False,
) -> Manifest:
    """Write the tenant's pages, facts and audit trail (or the part `filter` selects) to `path`.
    `world_only` (a remote caller's export): private pages and facts, and their audit events, are
    left out, as every tool leaves them out for a remote caller."""
    pages, facts, audit = _portable(deps.pages, deps.facts, deps.audit)
    now = deps.clock.now()
    since = filter.since
    subjects: set[str] | None = None if filter == PackFilter() else set()
    hidden: set[str] = set()
    with PackWriter(path, tenant=tenant, filter=filter, now=now) as writer:

        def add(member: str, item: PackModel, subject: str) -> None:
            writer.add(member, item)
            if subjects is not None:
                subjects.add(subject)
            _tick(progress, member, writer.counts[member])

        if filter.state is None:  # a state selects facts only
            for page in _scan(pages, tenant):
                if filter.entity is not None and page.slug != filter.entity:
                    continue
                if since is not None and page.updated_at <= since:
                    continue
                if world_only and page.visibility != "world":
                    hidden.add(page.slug)
                    continue
                add(PAGES, PackPage.of(page), page.slug)
        for fact in _scan(facts, tenant):
            if filter.entity is not None and fact.entity_slug != filter.entity:
                continue
            if since is not None and fact.created_at <= since and (fact.expired_at is None or fact.expired_at <= since):
                continue
            if filter.state is not None and fact_state(fact, now) != filter.state:
                continue
            if world_only and fact.visibility != "world":
                hidden.add(fact.fact_id)
                continue
            add(FACTS, PackFact.of(fact), fact.fact_id)
        for event in _scan(audit, tenant):
            if (subjects is not None and event.subject not in subjects) or event.subject in hidden:
                continue
            writer.add(AUDIT, PackAuditEvent.of(event))
            _tick(progress, AUDIT, writer.counts[AUDIT])
        return writer.finish()


def _tick(progress: Callable[[str, int], None] | None, member: str, n: int) -> None:
    if progress is not None and n % PROGRESS_EVERY == 0:
        progress(member, n)


# --------------------------------------------------------------------------- import


@dataclass
class ImportReport:
    """What an import did, per member: written (new or replaced), unchanged (already stored as in
    the pack), kept (stored differently and not older than the pack: left as it is)."""

    written: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MEMBERS, 0))
    unchanged: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MEMBERS, 0))
    kept: list[str] = field(default_factory=list)
    search_problem: str | None = None


def check_tenant(manifest: Manifest, *, tenant: str, from_tenant: str | None) -> None:
    """The tenant written is always the one the command names; a pack of another tenant is loaded
    into it only when the command also names the pack's tenant (`--from-tenant`)."""
    if manifest.tenant == tenant or from_tenant == manifest.tenant:
        return
    if from_tenant is not None:
        raise PackError(
            f"--from-tenant {from_tenant!r} does not match the pack, which was exported from tenant "
            f"{manifest.tenant!r}; nothing was written.",
            f"Pass --from-tenant {manifest.tenant} to load it into tenant {tenant!r}.",
        )
    raise PackError(
        f"The pack was exported from tenant {manifest.tenant!r}, and this import writes tenant {tenant!r}; "
        "nothing was written.",
        f"To import into tenant {manifest.tenant!r}: --tenant {manifest.tenant}. To load it into {tenant!r} "
        f"anyway, say so: --tenant {tenant} --from-tenant {manifest.tenant}.",
    )


def _content(page: Page) -> dict[str, Any]:
    return page.model_dump(exclude={"last_retrieved_at"})


def import_pack(
    reader: PackReader,
    deps: Deps,
    *,
    tenant: str,
    progress: Callable[[str, int], None] | None = None,
    dry_run: bool = False,
) -> ImportReport:
    """Write a verified pack (`reader.verify()` has passed) into `tenant`, item by item, idempotently.
    `dry_run`: write nothing; the report says what would be written, unchanged and kept."""
    _pages, facts, _audit = _portable(deps.pages, deps.facts, deps.audit)
    report = ImportReport()
    for n, item in enumerate(reader.items(PAGES), 1):
        page = item.to_page(tenant)
        stored = deps.pages.get(tenant, page.slug)
        if stored is not None and _content(stored) == _content(page):
            report.unchanged[PAGES] += 1
        elif stored is not None and stored.updated_at >= page.updated_at:
            report.kept.append(f"page {page.slug} (stored version updated {iso(stored.updated_at)})")
        elif dry_run:
            report.written[PAGES] += 1
        else:
            deps.pages.put(page)
            from fleetmem.memory.verbs.put_page import index_page

            if deps.search.write_through and not index_page(deps, page):
                report.search_problem = "the search index refused some pages; run: fleetmem reindex"
            report.written[PAGES] += 1
        _tick(progress, PAGES, n)
    top_seq = 0
    batch: list[Fact] = []

    def flush() -> None:
        stored = {f.fact_id: f for f in deps.facts.many(tenant, [f.fact_id for f in batch])}
        new: list[Fact] = []
        for fact in batch:
            have = stored.get(fact.fact_id)
            if have is None:
                if not dry_run:
                    deps.facts.put(fact)
                new.append(fact)
            elif have.model_copy(update={"vector": None, "vector_model": None}) == fact:
                report.unchanged[FACTS] += 1
            else:
                report.kept.append(f"fact {fact.fact_id} (stored in another state)")
        report.written[FACTS] += len(new)
        if dry_run:
            new.clear()
        live = [indexing.doc_for_fact(f) for f in new if f.expired_at is None and f.superseded_by is None]
        if live and deps.search.write_through:
            docs, problem = indexing.embed_docs(deps, live)
            deps.search.upsert(docs)
            report.search_problem = report.search_problem or problem
        batch.clear()

    for n, item in enumerate(reader.items(FACTS), 1):
        batch.append(item.to_fact(tenant))
        top_seq = max(top_seq, item.seq)
        if len(batch) >= BATCH:
            flush()
        _tick(progress, FACTS, n)
    if batch:
        flush()
    if top_seq and not dry_run:
        facts.raise_seq(tenant, top_seq)
    _import_audit(reader, deps.audit, tenant, report, progress, dry_run=dry_run)
    return report


def _import_audit(
    reader: PackReader,
    log: AuditLog,
    tenant: str,
    report: ImportReport,
    progress: Callable[[str, int], None] | None,
    *,
    dry_run: bool = False,
) -> None:
    """Append each event the tenant's trail of its subject does not hold yet (so a rerun adds none)."""
    known: dict[str, list[AuditEvent]] = {}
    for n, item in enumerate(reader.items(AUDIT), 1):
        event = item.to_event(tenant)
        if event.subject not in known:
            if len(known) > 10_000:
                known.clear()
            known[event.subject] = log.for_subject(tenant, event.subject)
        if event in known[event.subject]:
            known[event.subject].remove(event)  # a trail may repeat an identical event: count each once
            report.unchanged[AUDIT] += 1
        else:
            if not dry_run:
                log.append(event)
            report.written[AUDIT] += 1
        _tick(progress, AUDIT, n)


# --------------------------------------------------------------------------- over the tools

#: How many kept items an import over the tools lists (the count is always whole).
KEPT_SHOWN = 50


def _refused(exc: PackError, path: Path) -> Any:
    from fleetmem.errors import VerbError

    message = exc.message.replace(str(path), "The pack")
    return VerbError("invalid_params", message, exc.fix)


class PackFiles:
    """The `PackTransfer` port (`fleetmem.ports`) over this module: what the `export_pack` and
    `import_pack` tools run. A pack travels whole in one call, so each carries at most `max_bytes`
    (the tools' limit); larger ones are the CLI's (`fleetmem export` / `fleetmem import --pack`)."""

    def export(
        self,
        deps: Deps,
        *,
        tenant: str,
        entity: str | None,
        since: datetime | None,
        state: str | None,
        world_only: bool,
        max_bytes: int,
    ) -> tuple[bytes, dict[str, int]]:
        import tempfile

        from fleetmem.errors import VerbError

        chosen = PackFilter(entity=entity, since=since, state=state)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory(prefix="fmpack-") as folder:
            path = Path(folder) / "export.fmpack"
            try:
                manifest = export_pack(path, deps, tenant=tenant, filter=chosen, world_only=world_only)
            except PackError as exc:
                raise _refused(exc, path) from None
            size = path.stat().st_size
            if size > max_bytes:
                raise VerbError(
                    "invalid_params",
                    f"The pack is {size // 1024} KB; a pack travels in one call of at most {max_bytes // 1024} KB, "
                    "so it was not sent.",
                    "Export a part (an entity, a state or a `since` time), or run `fleetmem export` where the "
                    "stores are reachable (it writes packs of any size).",
                )
            return path.read_bytes(), {m: manifest.members[m].count for m in MEMBERS}  # type: ignore[index]

    def load(self, deps: Deps, *, tenant: str, data: bytes, from_tenant: str | None, dry_run: bool) -> dict[str, Any]:
        import tempfile

        from fleetmem.errors import VerbError

        with tempfile.TemporaryDirectory(prefix="fmpack-") as folder:
            path = Path(folder) / "import.fmpack"
            path.write_bytes(data)
            try:
                with PackReader(path) as reader:
                    source = reader.manifest.tenant
                    if source != tenant and from_tenant != source:
                        raise VerbError(
                            "invalid_params",
                            f"The pack was exported from tenant {source!r}, and your token writes tenant "
                            f"{tenant!r}; nothing was written.",
                            f"To load it into {tenant!r} anyway, say so: from_tenant={source!r}.",
                        )
                    counts = reader.verify()
                    report = import_pack(reader, deps, tenant=tenant, dry_run=dry_run)
            except PackError as exc:
                raise _refused(exc, path) from None
        return {
            "dry_run": dry_run,
            "tenant": tenant,
            "pack_tenant": source,
            "total": counts,
            "written": report.written,
            "unchanged": report.unchanged,
            "kept": report.kept[:KEPT_SHOWN],
            "kept_count": len(report.kept),
            "search_problem": report.search_problem,
        }
