"""Slugs and aliases: the two normal forms entity resolution compares.

Public functions:
- `slugify_segment(text) -> str`: NFKC-normalized and casefolded (NFD and NFC spellings give one
  slug); the letters, digits and combining marks of EVERY script are kept, format characters
  (category Cf: ZWJ, ZWNJ, ZWSP, soft hyphen) are dropped without separating anything ("Ka" + ZWJ +
  "ren" -> "karen"), every run of anything else becomes one "-", leading/trailing "-" stripped
  ("Zoë Müller!" -> "zoë-müller", "Сергей Иванов" -> "сергей-иванов", "北京办公室" kept as is). A
  combining mark counts only after a letter or digit of its word.
- `slugify(text) -> str`: `slugify_segment` per "/"-separated path segment, empty segments dropped
  ("People/Alice Example" -> "people/alice-example"). May return "" (nothing sluggable: "!!!///???").
- `ascii_slug(text) -> str`: `slugify` with letters ASCII-folded and anything else dropped (the
  spelling slugs had before they kept every script: "Zoë Müller" -> "zoe-muller"). Resolution also
  tries it, so names with accents still find pages whose slugs were written without them.
- `is_canonical_slug(slug) -> bool`: non-empty and already equal to its slugified form.
- `is_path_like(slug) -> bool`: a "." or ".." path segment or a backslash: a file-system path, not a
  slug. Writers refuse it without guessing a slug (folding "../../x" to "x" would change its meaning).
- `path_slug_error(what, value, field=None) -> VerbError`: the `invalid_params` for such a value
  (`what` names it: "slug", "link target", "entity"; `field` the argument in `detail`, by default
  "slug" or "links"): it explains the slug grammar (SLUG_GRAMMAR) and offers no call to run.
- `match_key(text) -> str`: THE key titles and aliases are matched on (entity resolution, and the
  keys the page stores write): format characters (ZWJ, ZWNJ, ZWSP, soft hyphen, bidi marks; Unicode
  category Cf) dropped without leaving a gap, NFKC, casefolded ("Straße" and "STRASSE" -> "strasse"),
  a combining dot above directly after "i" dropped ("İ" casefolds to "i" + U+0307; the key of
  "İlker Işık" is the key of "ilker işık"), whitespace collapsed to single spaces, trimmed. NFD
  and NFC spellings share one key. It folds nothing else: "Müller"/"Muller", "Işık"/"Isik" (ı is not
  i) and "René"/"Rene" stay distinct, so different people are never merged by the key. An ASCII
  text's key is `normalize_alias` of it.
- `alias_keys(text)` / `title_keys(text) -> list[str]`: the keys a store may hold an alias / title
  equal to `text` under: `match_key`, and the key written before it (`normalize_alias` /
  `str.lower()`): a page keeps the keys it was written with until its next put, so resolution
  looks up both (one key for a plain ASCII name, so it costs nothing there).
- `normalize_alias(text) -> str`: casefolded, whitespace collapsed to single spaces, trimmed: the
  alias key written before `match_key` (kept for the lookups of such stored keys and for display).
- `last_segment(slug) -> str`: the part after the final "/".
- `slug_size_problem(slug) -> str | None`: why `slug` breaks the size limits (D16: at most
  SLUG_MAX characters, each "/" segment at most SLUG_SEGMENT_MAX), or None when it fits.
- `shorten_slug(slug) -> str`: an example slug within the limits (segments cut at a "-" where
  possible) for suggestions; never used to store anything on the caller's behalf.
"""

from __future__ import annotations

import re
import unicodedata

from fleetmem.errors import Fix, VerbError
from fleetmem.protocol import SLUG_MAX, SLUG_SEGMENT_MAX

SLUG_GRAMMAR = (
    "a slug is one or more '/'-separated segments; each segment is lowercase letters and digits of "
    "any script joined by single '-' (e.g. 'people/alice-example', 'offices/北京办公室'), with no "
    f"segment that is one dot or two dots and no backslash; at most {SLUG_MAX} characters, "
    f"{SLUG_SEGMENT_MAX} per segment."
)

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_ALNUM_RUN = re.compile(r"[a-z0-9]+")
_WHITESPACE = re.compile(r"\s+")
_DOTTED_I = re.compile("i\u0307")


def _fold(text: str) -> str:
    # casefold can leave a string that NFKC changes again (and NFKC one that casefold changes):
    # repeat until stable, so slugify(slugify(x)) == slugify(x) for every input.
    out = unicodedata.normalize("NFKC", text)
    for _ in range(3):
        nxt = unicodedata.normalize("NFKC", out.casefold())
        if nxt == out:
            break
        out = nxt
    return out


def _drop_format(text: str) -> str:
    """Without its format characters (Cf: ZWJ, ZWNJ, ZWSP, soft hyphen, bidi marks): invisible,
    they join or separate nothing a reader sees, so a name never differs by them."""
    if text.isascii():  # every format character is outside ASCII
        return text
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def slugify_segment(text: str) -> str:
    if text.isascii():  # the same answer without a per-character Unicode walk: ASCII letters and digits
        return "-".join(_ALNUM_RUN.findall(text.lower()))
    out: list[str] = []
    gap = False
    for ch in _fold(_drop_format(text)):
        cat = unicodedata.category(ch)[0]
        if cat in "LN" or (cat == "M" and out and not gap):
            if gap and out:
                out.append("-")
            gap = False
            out.append(ch)
        else:
            gap = True
    return "".join(out)


def slugify(text: str) -> str:
    parts = (slugify_segment(p) for p in text.split("/"))
    return "/".join(p for p in parts if p)


def _ascii_segment(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NON_ALNUM.sub("-", folded.lower()).strip("-")


def ascii_slug(text: str) -> str:
    parts = (_ascii_segment(p) for p in text.split("/"))
    return "/".join(p for p in parts if p)


def is_path_like(slug: str) -> bool:
    return "\\" in slug or any(seg.strip() in (".", "..") for seg in slug.split("/"))


def path_slug_error(what: str, value: str, *, field: str | None = None) -> VerbError:
    shown = value.strip()[:80]
    why = f"{what} {shown!r} is a file-system path, not a page slug: {SLUG_GRAMMAR}"
    instead = (
        f"pass the {what} as the slug of the page you mean (entity(name) shows existing "
        "slugs); relative paths are not resolved, so no slug is guessed from this one."
    )
    return VerbError(
        "invalid_params",
        f"{what} {shown!r} is a path, not a page slug.",
        f"Problem: {what} {shown!r} holds a segment that is one dot or two dots, or a backslash. Cause: {SLUG_GRAMMAR} "
        f"Fix: {instead}",
        why=why,
        detail={"field": field or ("slug" if what == "slug" else "links"), "reason": "path_slug", "value": shown},
        fix=Fix(why=instead),
        klass="caller",
    )


def is_canonical_slug(slug: str) -> bool:
    return bool(slug) and slugify(slug) == slug


def normalize_alias(text: str) -> str:
    return _WHITESPACE.sub(" ", text.casefold()).strip()


def alias_keys(text: str) -> list[str]:
    """The keys an alias equal to `text` may be stored under: `match_key` (written now) and
    `normalize_alias` (written before it; a page keeps its keys until its next put). One key for
    a plain ASCII name."""
    return [k for k in dict.fromkeys((match_key(text), normalize_alias(text))) if k]


def title_keys(text: str) -> list[str]:
    """The keys a title equal to `text` may be stored under: `match_key` (written now) and
    `str.lower()` (written before it). One key for a plain ASCII name."""
    return [k for k in dict.fromkeys((match_key(text), text.strip().lower())) if k]


def match_key(text: str) -> str:
    # Only the dot above that casefold gives "İ" is dropped (the dot of a lower "i" is its own):
    # folding accents or "ı" into ASCII would merge different names (Müller/Muller, Işık/Isik).
    folded = _DOTTED_I.sub("i", _fold(_drop_format(text)))
    return _WHITESPACE.sub(" ", folded).strip()


def last_segment(slug: str) -> str:
    return slug.rsplit("/", 1)[-1]


def slug_size_problem(slug: str) -> str | None:
    if len(slug) > SLUG_MAX:
        return f"the slug is {len(slug)} characters long; slugs are at most {SLUG_MAX}"
    longest = max(slug.split("/"), key=len, default="")
    if len(longest) > SLUG_SEGMENT_MAX:
        return (
            f"the slug segment {longest[:40]!r}… is {len(longest)} characters long; "
            f"each segment is at most {SLUG_SEGMENT_MAX}"
        )
    return None


def _shorten_segment(segment: str, limit: int) -> str:
    if len(segment) <= limit:
        return segment
    cut = segment[:limit]
    return (cut.rsplit("-", 1)[0] if "-" in cut[limit // 2 :] else cut).strip("-")


def shorten_slug(slug: str) -> str:
    parts = [_shorten_segment(p, SLUG_SEGMENT_MAX) for p in slug.split("/") if p]
    out = "/".join(parts)
    while len(out) > SLUG_MAX and parts:
        parts[-1] = _shorten_segment(parts[-1], max(1, len(parts[-1]) - (len(out) - SLUG_MAX)))
        out = "/".join(p for p in parts if p)
    return out[:SLUG_MAX].strip("-/")


_FOLDER_TYPES = {"people": "person", "companies": "company", "projects": "project"}


def fact_entity_head(slug: str, name: str = "") -> tuple[str, str | None]:
    """How a fact-only entity is named: the name as asked when it is the slug's last segment, else
    that segment in words; its type from the folder (people/, companies/, projects/)."""
    asked = " ".join(name.split())
    if asked and "/" not in asked and slugify(asked) == last_segment(slug):
        title = asked
    else:
        title = last_segment(slug).replace("-", " ")
    folder = slug.split("/", 1)[0] if "/" in slug else ""
    return title, _FOLDER_TYPES.get(folder)
