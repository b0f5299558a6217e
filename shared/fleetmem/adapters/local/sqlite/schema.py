"""The store's schema: the tables, indexes and triggers of the current version, and the migrations
that bring a file written by an older release up to it."""

from __future__ import annotations

import sqlite3

from fleetmem.errors import Unavailable
from fleetmem.protocol import IDEMPOTENCY_LEASE_SECONDS, MENTION_LINK_TYPE

SCHEMA_VERSION = 13
# 2: D14 change sequences (pages/facts change_seq, cursors page_seq/fact_seq)
# 3: links carry their source page's updated_at and visibility (backlinks read only what they return)
# 4: idempotency claims carry a lease (lease_until) and a claim id
# 5: page tombstones, the cursors' TTL-expiry position, facts indexed by valid_until (delta's retracted[])
# 6: D23 withdrawn claims (the schema script adds the table)
# 7: facts carry their content_origin (D24)
# 8: D22 write receipts: idempotency keyed by (tenant, client_id, request id), with the receipt columns
# 9: D32 core pages: the partial index of pages marked `core: true` (the schema script adds it)
# 10: links carry their source page's group (its type, "page" without one) and whether the row is the
#    page's first link to its target (entity's referenced_by counts pages from the index, D35)
# 11: `link_groups`, a target's linking pages and links counted per group and visibility, kept by
#    triggers on `links` (entity's referenced_by totals without a scan of a hub's link rows)
# 12: a credential's last use, the audit log indexed by time
# 13: `facts_entity` carries the columns an entity's fact counts read (visibility and state), so
#    list_pages(with_counts) and the entity card count from the index alone

#: A target's linking pages counted per (group, visibility) (entity's referenced_by totals and the
#: card's backlink count, D35): `pages` sums `first_to_target` (distinct linking pages), `typed`
#: counts the links that are not mentions; self links are left out, as every backlink read leaves
#: them. Kept by triggers on `links`, so every write of a link row keeps it exact; a row whose
#: counts fall to zero is removed.
#: link types that are mentions: listed as backlinks but not counted (the singular is tolerated)
MENTION_TYPES = (MENTION_LINK_TYPE, "mention")
_MENTIONS_SQL = ", ".join(f"'{t}'" for t in MENTION_TYPES)
_LINK_GROUPS_TABLE = """
CREATE TABLE IF NOT EXISTS link_groups (
  tenant TEXT NOT NULL, target TEXT NOT NULL, source_group TEXT NOT NULL, source_visibility TEXT NOT NULL,
  pages INTEGER NOT NULL, typed INTEGER NOT NULL,
  PRIMARY KEY (tenant, target, source_group, source_visibility)
) WITHOUT ROWID;
"""
_ADD = (
    "INSERT INTO link_groups (tenant, target, source_group, source_visibility, pages, typed) "
    f"SELECT new.tenant, new.target, new.source_group, new.source_visibility, new.first_to_target, "
    f"new.type NOT IN ({_MENTIONS_SQL}) WHERE new.source <> new.target "
    "ON CONFLICT DO UPDATE SET pages = pages + excluded.pages, typed = typed + excluded.typed;"
)
_TAKE = (
    "UPDATE link_groups SET pages = pages - old.first_to_target, "
    f"typed = typed - (old.type NOT IN ({_MENTIONS_SQL})) "
    "WHERE old.source <> old.target AND tenant = old.tenant AND target = old.target "
    "AND source_group = old.source_group AND source_visibility = old.source_visibility;\n"
    "  DELETE FROM link_groups WHERE tenant = old.tenant AND target = old.target "
    "AND source_group = old.source_group AND source_visibility = old.source_visibility "
    "AND pages = 0 AND typed = 0;"
)
_LINK_GROUPS = (
    _LINK_GROUPS_TABLE
    + f"CREATE TRIGGER IF NOT EXISTS links_groups_ai AFTER INSERT ON links BEGIN\n  {_ADD}\nEND;\n"
    + f"CREATE TRIGGER IF NOT EXISTS links_groups_ad AFTER DELETE ON links BEGIN\n  {_TAKE}\nEND;\n"
    + "CREATE TRIGGER IF NOT EXISTS links_groups_au AFTER UPDATE OF tenant, target, source, type, "
    + f"source_group, source_visibility, first_to_target ON links BEGIN\n  {_TAKE}\n  {_ADD}\nEND;\n"
)

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE IF NOT EXISTS fact_seq (tenant TEXT PRIMARY KEY, seq INTEGER NOT NULL);

CREATE TABLE IF NOT EXISTS facts (
  tenant TEXT NOT NULL, fact_id TEXT NOT NULL, seq INTEGER NOT NULL, text TEXT NOT NULL,
  kind TEXT NOT NULL, entity_slug TEXT, provenance TEXT NOT NULL, visibility TEXT NOT NULL,
  session_id TEXT, client_id TEXT NOT NULL, created_at INTEGER NOT NULL, valid_until INTEGER,
  expired_at INTEGER, expired_reason TEXT, expired_by TEXT, superseded_by TEXT, supersedes TEXT,
  vector BLOB, vector_model TEXT, change_seq INTEGER NOT NULL DEFAULT 0, content_origin TEXT,
  UNIQUE (tenant, fact_id)
);
CREATE INDEX IF NOT EXISTS facts_entity ON facts (
  tenant, entity_slug, created_at, seq, visibility, expired_at, superseded_by, valid_until
);
CREATE INDEX IF NOT EXISTS facts_session ON facts (tenant, session_id, created_at, seq);
CREATE INDEX IF NOT EXISTS facts_created ON facts (tenant, created_at, seq);
CREATE INDEX IF NOT EXISTS facts_change ON facts (tenant, change_seq);
CREATE INDEX IF NOT EXISTS facts_expiry ON facts (tenant, valid_until, seq) WHERE valid_until IS NOT NULL;

CREATE TABLE IF NOT EXISTS pages (
  tenant TEXT NOT NULL, slug TEXT NOT NULL, leaf TEXT, title TEXT NOT NULL, title_lc TEXT NOT NULL,
  type TEXT, aliases TEXT NOT NULL, summary TEXT, visibility TEXT NOT NULL, body TEXT NOT NULL,
  links TEXT NOT NULL, timeline TEXT NOT NULL, frontmatter TEXT NOT NULL,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, last_retrieved_at INTEGER, author TEXT,
  change_seq INTEGER NOT NULL DEFAULT 0,
  UNIQUE (tenant, slug)
);
CREATE INDEX IF NOT EXISTS pages_leaf ON pages (tenant, leaf, slug);
CREATE INDEX IF NOT EXISTS pages_title ON pages (tenant, title_lc, slug);
CREATE INDEX IF NOT EXISTS pages_updated ON pages (tenant, updated_at, slug);
CREATE INDEX IF NOT EXISTS pages_type ON pages (tenant, type, slug);
CREATE INDEX IF NOT EXISTS pages_change ON pages (tenant, change_seq);
-- D32: the core pages (frontmatter `core: true`), the few every context_pack reads
CREATE INDEX IF NOT EXISTS pages_core ON pages (tenant, slug) WHERE json_type(frontmatter, '$.core') = 'true';

-- D23: a claim forget withdrew, per entity ('': every entity) and visibility
CREATE TABLE IF NOT EXISTS withdrawn_claims (
  tenant TEXT NOT NULL, claim TEXT NOT NULL, scope TEXT NOT NULL, visibility TEXT NOT NULL,
  fact_id TEXT NOT NULL, client_id TEXT NOT NULL, at INTEGER NOT NULL,
  PRIMARY KEY (tenant, claim, scope, visibility)
) WITHOUT ROWID;

-- A deleted page's tombstone, numbered in the page change sequence (delta's retracted[])
CREATE TABLE IF NOT EXISTS page_tombstones (
  tenant TEXT NOT NULL, slug TEXT NOT NULL, visibility TEXT NOT NULL, deleted_at INTEGER NOT NULL,
  change_seq INTEGER NOT NULL, PRIMARY KEY (tenant, slug)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS page_tombstones_change ON page_tombstones (tenant, change_seq);

-- D14: per-tenant commit-ordered change counters ('page', 'fact'), bumped inside each write
CREATE TABLE IF NOT EXISTS change_seq (
  tenant TEXT NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tenant, kind)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS aliases (
  tenant TEXT NOT NULL, alias TEXT NOT NULL, slug TEXT NOT NULL, PRIMARY KEY (tenant, alias, slug)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS aliases_slug ON aliases (tenant, slug);

-- A link row carries its source page's updated_at and visibility (rewritten with the page, in
-- the same transaction), so a target's newest backlinks are the first rows of `links_recent`
-- and its counts are rows of `link_groups` (below): no page is read.
CREATE TABLE IF NOT EXISTS links (
  tenant TEXT NOT NULL, source TEXT NOT NULL, ord INTEGER NOT NULL, target TEXT NOT NULL,
  type TEXT NOT NULL, context TEXT, source_updated_at INTEGER NOT NULL DEFAULT 0,
  source_visibility TEXT NOT NULL DEFAULT 'private', source_group TEXT NOT NULL DEFAULT 'page',
  first_to_target INTEGER NOT NULL DEFAULT 1, PRIMARY KEY (tenant, source, ord)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS links_recent ON links (tenant, target, source_updated_at DESC, source, ord);
-- entity's referenced_by (D35): the linking pages counted per group and each group's newest, from
-- the index alone (source_group: the source page's type, "page" without one, kept current by `put`;
-- first_to_target: 1 on a page's first link row to this target, so a sum counts pages, not links)
CREATE INDEX IF NOT EXISTS links_group ON links (
  tenant, target, source_group, source_updated_at DESC, source DESC, source_visibility, type, first_to_target
);
"""
    + _LINK_GROUPS
    + """

CREATE TABLE IF NOT EXISTS timeline (
  tenant TEXT NOT NULL, slug TEXT NOT NULL, ord INTEGER NOT NULL, date TEXT NOT NULL,
  text TEXT NOT NULL, PRIMARY KEY (tenant, slug, ord)
) WITHOUT ROWID;

CREATE VIRTUAL TABLE IF NOT EXISTS page_names_fts USING fts5 (
  tenant_key, names, tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TABLE IF NOT EXISTS cursors (
  tenant TEXT NOT NULL, client_id TEXT NOT NULL, session_id TEXT NOT NULL, since INTEGER NOT NULL,
  slug TEXT NOT NULL, touched_at INTEGER NOT NULL, incomplete_streak INTEGER NOT NULL,
  version INTEGER NOT NULL, page_seq INTEGER, fact_seq INTEGER, expiry TEXT,
  PRIMARY KEY (tenant, client_id, session_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS cursors_touched ON cursors (tenant, client_id, touched_at);

CREATE TABLE IF NOT EXISTS clients (
  token_hash TEXT PRIMARY KEY, token_id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,
  client_id TEXT NOT NULL, scopes TEXT NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER,
  last_used_at INTEGER
);
CREATE INDEX IF NOT EXISTS clients_tenant ON clients (tenant, created_at);

CREATE TABLE IF NOT EXISTS idempotency (
  tenant TEXT NOT NULL, client_id TEXT NOT NULL, verb TEXT NOT NULL, key TEXT NOT NULL,
  request_hash TEXT NOT NULL, result TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  lease_until INTEGER, claim_id TEXT, client_request_id TEXT, state TEXT NOT NULL DEFAULT 'running',
  updated_at INTEGER, holder TEXT, outcome TEXT,
  PRIMARY KEY (tenant, client_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_expires ON idempotency (expires_at);
CREATE INDEX IF NOT EXISTS idempotency_newest ON idempotency (tenant, client_id, created_at);

CREATE TABLE IF NOT EXISTS audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, subject TEXT NOT NULL,
  action TEXT NOT NULL, actor TEXT NOT NULL, at INTEGER NOT NULL, reason TEXT, provenance TEXT,
  detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_subject ON audit (tenant, subject, at, id);
CREATE INDEX IF NOT EXISTS audit_time ON audit (tenant, at, id);

CREATE TABLE IF NOT EXISTS docs (
  id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, doc_id TEXT NOT NULL,
  kind TEXT NOT NULL, slug TEXT NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL,
  visibility TEXT NOT NULL, fact_id TEXT, updated_at INTEGER NOT NULL, vector BLOB, vector_model TEXT,
  rev INTEGER NOT NULL DEFAULT 0,
  UNIQUE (tenant, doc_id)
);
CREATE INDEX IF NOT EXISTS docs_rev ON docs (tenant, rev);
CREATE INDEX IF NOT EXISTS docs_slug ON docs (tenant, slug, kind);
CREATE INDEX IF NOT EXISTS docs_model ON docs (tenant, vector_model);

-- Contentless keyword index. Every word is indexed as a token prefixed with the key of its
-- (tenant, kind, visibility) partition (`fm_fts_terms`, registered on every connection), so a
-- query names only tokens of the partitions it may see: filtering costs nothing, another
-- tenant's documents are never even candidates, and document frequencies are per partition.
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5 (
  title, text, content = '', tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TRIGGER IF NOT EXISTS docs_ai AFTER INSERT ON docs BEGIN
  INSERT INTO docs_fts (rowid, title, text) VALUES (
    new.id, fm_fts_terms(new.tenant, new.kind, new.visibility, new.title),
    fm_fts_terms(new.tenant, new.kind, new.visibility, new.text));
END;
CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
  INSERT INTO docs_fts (docs_fts, rowid, title, text) VALUES (
    'delete', old.id, fm_fts_terms(old.tenant, old.kind, old.visibility, old.title),
    fm_fts_terms(old.tenant, old.kind, old.visibility, old.text));
END;
CREATE TRIGGER IF NOT EXISTS docs_au AFTER UPDATE OF tenant, kind, visibility, title, text ON docs BEGIN
  INSERT INTO docs_fts (docs_fts, rowid, title, text) VALUES (
    'delete', old.id, fm_fts_terms(old.tenant, old.kind, old.visibility, old.title),
    fm_fts_terms(old.tenant, old.kind, old.visibility, old.text));
  INSERT INTO docs_fts (rowid, title, text) VALUES (
    new.id, fm_fts_terms(new.tenant, new.kind, new.visibility, new.title),
    fm_fts_terms(new.tenant, new.kind, new.visibility, new.text));
END;

-- Vector cache validity. Every write transaction on a tenant's docs first bumps `gen` and stamps
-- the rows it writes with `rev = gen`; deleted rows leave a tombstone at that gen. A cache built
-- at gen g catches up by reading rows and tombstones with rev > g. Tombstones at or below
-- `floor` were pruned: a cache older than `floor` reloads in full.
CREATE TABLE IF NOT EXISTS search_gen (
  tenant TEXT PRIMARY KEY, gen INTEGER NOT NULL, floor INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS docs_gone (tenant TEXT NOT NULL, id INTEGER NOT NULL, rev INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS docs_gone_rev ON docs_gone (tenant, rev);
CREATE TRIGGER IF NOT EXISTS docs_gone_ad AFTER DELETE ON docs BEGIN
  INSERT INTO docs_gone (tenant, id, rev)
  VALUES (old.tenant, old.id, (SELECT gen FROM search_gen WHERE tenant = old.tenant));
END;
"""
)


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the schema in a new file, or bring an older one up to `SCHEMA_VERSION`, inside the
    schema transaction; refuses a file written by a newer release."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        # Never guess at a layout we do not know: a newer release wrote this file.
        raise Unavailable(
            f"this data directory uses store schema {version}; this fleetmem reads schema "
            f"{SCHEMA_VERSION} — upgrade fleetmem or point --data-dir elsewhere",
            reason="schema_newer",
        )
    if version == SCHEMA_VERSION:
        return
    if version == 1:
        _migrate_1_to_2(conn)
    if 1 <= version <= 2:
        _migrate_2_to_3(conn)
    if 1 <= version <= 3:
        _migrate_3_to_4(conn)
    if 1 <= version <= 4:
        _migrate_4_to_5(conn)
    if 1 <= version <= 6:
        _migrate_6_to_7(conn)
    if 1 <= version <= 7:
        _migrate_7_to_8(conn)
    if 1 <= version <= 9:
        _migrate_9_to_10(conn)
    if 1 <= version <= 10:
        _migrate_10_to_11(conn)
    if 1 <= version <= 11:
        _migrate_11_to_12(conn)
    if 1 <= version <= 12:
        conn.execute("DROP INDEX IF EXISTS facts_entity")  # the schema script re-creates it covering
    for stmt in _split_script(_SCHEMA):
        conn.execute(stmt)
    if version == 0:
        conn.execute("INSERT INTO docs_fts (docs_fts, rank) VALUES ('rank', 'bm25(3.0, 1.0)')")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2 (D14), inside the schema transaction: add the change-sequence columns and
    number the existing rows per tenant in their old delta order — pages by (updated_at, slug),
    facts by (created_at, seq) — so a session cursor from before the upgrade resumes from its
    (since, slug) without loss. The counters start after the last number given."""
    conn.execute("ALTER TABLE pages ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE facts ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE cursors ADD COLUMN page_seq INTEGER")
    conn.execute("ALTER TABLE cursors ADD COLUMN fact_seq INTEGER")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS change_seq (tenant TEXT NOT NULL, kind TEXT NOT NULL, "
        "seq INTEGER NOT NULL, PRIMARY KEY (tenant, kind)) WITHOUT ROWID"
    )
    for table, kind, order in (("pages", "page", "updated_at, slug"), ("facts", "fact", "created_at, seq")):
        counters: dict[str, int] = {}
        updates: list[tuple[int, int]] = []
        for tenant, rowid in conn.execute(f"SELECT tenant, rowid FROM {table} ORDER BY tenant, {order}"):
            counters[tenant] = counters.get(tenant, 0) + 1
            updates.append((counters[tenant], rowid))
        conn.executemany(f"UPDATE {table} SET change_seq = ? WHERE rowid = ?", updates)
        conn.executemany(
            "INSERT INTO change_seq (tenant, kind, seq) VALUES (?, ?, ?)",
            [(tenant, kind, n) for tenant, n in counters.items()],
        )


def _migrate_9_to_10(conn: sqlite3.Connection) -> None:
    """Schema 9 -> 10, inside the schema transaction: copy each source page's group (its type,
    "page" without one) onto its link rows and mark each page's first link row to a target (the
    schema script that runs next indexes them)."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(links)")}
    for column, kind in (
        ("source_group", "TEXT NOT NULL DEFAULT 'page'"),
        ("first_to_target", "INTEGER NOT NULL DEFAULT 1"),
    ):
        if column not in have:
            conn.execute(f"ALTER TABLE links ADD COLUMN {column} {kind}")
    conn.execute(
        "UPDATE links SET source_group = coalesce(nullif(p.type, ''), 'page') "
        "FROM pages p WHERE p.tenant = links.tenant AND p.slug = links.source"
    )
    conn.execute(
        "UPDATE links SET first_to_target = 0 WHERE EXISTS (SELECT 1 FROM links e WHERE e.tenant = links.tenant "
        "AND e.source = links.source AND e.target = links.target AND e.ord < links.ord)"
    )


def _migrate_10_to_11(conn: sqlite3.Connection) -> None:
    """Schema 10 -> 11, inside the schema transaction: count every target's linking pages per group
    and visibility into `link_groups` (the schema script that runs next adds the triggers that keep
    it)."""
    conn.execute("DROP INDEX IF EXISTS links_count")  # the counts it served are link_groups rows now
    conn.execute(_LINK_GROUPS_TABLE)
    conn.execute("DELETE FROM link_groups")
    conn.execute(
        "INSERT INTO link_groups (tenant, target, source_group, source_visibility, pages, typed) "
        f"SELECT tenant, target, source_group, source_visibility, sum(first_to_target), "
        f"sum(type NOT IN ({_MENTIONS_SQL})) FROM links WHERE source <> target GROUP BY 1, 2, 3, 4"
    )


def _migrate_11_to_12(conn: sqlite3.Connection) -> None:
    """Schema 11 -> 12, inside the schema transaction: a credential's last use (the schema script
    that runs next adds the audit index by time)."""
    if "last_used_at" not in {r[1] for r in conn.execute("PRAGMA table_info(clients)")}:
        conn.execute("ALTER TABLE clients ADD COLUMN last_used_at INTEGER")


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Schema 2 -> 3, inside the schema transaction: copy each source page's updated_at and
    visibility onto its link rows and swap the target index for the two backlink indexes (the
    schema script that runs next creates them)."""
    conn.execute("ALTER TABLE links ADD COLUMN source_updated_at INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE links ADD COLUMN source_visibility TEXT NOT NULL DEFAULT 'private'")
    conn.execute(
        "UPDATE links SET source_updated_at = p.updated_at, source_visibility = p.visibility "
        "FROM pages p WHERE p.tenant = links.tenant AND p.slug = links.source"
    )
    conn.execute("DROP INDEX IF EXISTS links_target")


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """Schema 3 -> 4, inside the schema transaction: idempotency claims carry a lease and a claim
    id. A claim still in flight from before was left by a call that no longer runs (a killed
    server), so it gets the lease it would have had: a retry takes its key over once it lapses."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(idempotency)")}
    for column, kind in (("lease_until", "INTEGER"), ("claim_id", "TEXT")):
        if column not in have:
            conn.execute(f"ALTER TABLE idempotency ADD COLUMN {column} {kind}")
    conn.execute(
        "UPDATE idempotency SET lease_until = created_at + ? WHERE result IS NULL AND lease_until IS NULL",
        (IDEMPOTENCY_LEASE_SECONDS * 1000,),
    )


def _migrate_4_to_5(conn: sqlite3.Connection) -> None:
    """Schema 4 -> 5, inside the schema transaction: the cursors' TTL-expiry position (the schema
    script that runs next adds the tombstone table and the expiry index)."""
    if "expiry" not in {r[1] for r in conn.execute("PRAGMA table_info(cursors)")}:
        conn.execute("ALTER TABLE cursors ADD COLUMN expiry TEXT")


def _migrate_6_to_7(conn: sqlite3.Connection) -> None:
    """Schema 6 -> 7, inside the schema transaction: facts carry their `content_origin` (D24); older
    rows keep none."""
    if "content_origin" not in {r[1] for r in conn.execute("PRAGMA table_info(facts)")}:
        conn.execute("ALTER TABLE facts ADD COLUMN content_origin TEXT")


def _migrate_7_to_8(conn: sqlite3.Connection) -> None:
    """Schema 7 -> 8 (D22), inside the schema transaction: claims are keyed by (tenant, client_id,
    request id) instead of per tool, so the table is rebuilt by the schema script that runs next;
    each old key moves to its request id (its UUIDv5, the key itself kept as `client_request_id`).
    Where one client used one key for two tools, the newest record keeps it."""
    from fleetmem.protocol import request_uuid, tool_request_hash

    conn.execute("ALTER TABLE idempotency RENAME TO idempotency_v7")
    conn.execute("DROP INDEX IF EXISTS idempotency_expires")
    old = conn.execute(
        "SELECT tenant, client_id, verb, key, request_hash, result, created_at, expires_at, lease_until, "
        "claim_id FROM idempotency_v7 ORDER BY created_at"
    ).fetchall()
    conn.execute("DROP TABLE idempotency_v7")
    for stmt in _split_script(_SCHEMA):
        if "idempotency" in stmt:
            conn.execute(stmt)
    for tenant, client_id, verb, key, request_hash, result, created, expires, lease, claim_id in old:
        request_id, client_request_id = request_uuid(key)
        conn.execute(
            "INSERT OR REPLACE INTO idempotency (tenant, client_id, verb, key, request_hash, result, created_at, "
            "expires_at, lease_until, claim_id, client_request_id, state, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                tenant,
                client_id,
                verb,
                request_id,
                tool_request_hash(verb, request_hash),
                result,
                created,
                expires,
                lease,
                claim_id,
                client_request_id,
                "running" if result is None else "committed",
                created,
            ),
        )


def _split_script(script: str) -> list[str]:
    """Split the schema into statements, keeping trigger bodies (which contain ';') whole."""
    stmts: list[str] = []
    buf: list[str] = []
    in_trigger = False
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        buf.append(line)
        if stripped.upper().startswith("CREATE TRIGGER"):
            in_trigger = True
        if (in_trigger and stripped.upper() == "END;") or (not in_trigger and stripped.endswith(";")):
            stmts.append("\n".join(buf))
            buf, in_trigger = [], False
    if buf:
        stmts.append("\n".join(buf))
    return stmts
