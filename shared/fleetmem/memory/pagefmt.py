"""Page content format: markdown with optional YAML frontmatter, privacy fences, mentions.

Public functions:
- `parse_page_content(content) -> (frontmatter: dict, body: str)`: splits a leading
  `---\\n<yaml>\\n---` block (PyYAML's safe loader) from the markdown body. No frontmatter -> `{}`.
  Raises `PageFormatError` (a ValueError) when the YAML does not parse, is not a mapping, or uses an
  alias (`*name`, also in a `<<: *name` merge): an alias repeats a node by reference, so a few
  hundred bytes of nested aliases expand to gigabytes once the values are copied and stored.
- `split_frontmatter(content) -> (yaml_text | None, body)`: the split alone, without parsing.
- `render_page_content(frontmatter, body) -> str`: the inverse (empty frontmatter -> body only).
- `strip_private(text) -> str`: removes private content (rule below).
- `mentions(body) -> list[str]`: the distinct slugs written as `[[slug]]` / `[[slug|label]]`, in order.
- `first_h1(body) -> str | None`: text of the first `# ` heading.
- `first_sentence(body) -> str`: the first prose sentence (headings, code, tables, comments skipped;
  inline markdown reduced to its text), looked for in the first `SENTENCE_SCAN_CHARS` characters of
  each paragraph, so its work grows linearly with the body whatever the markup.
- `clip(text, limit) -> str`: at most `limit` characters, ending with "…" when cut.

Privacy rule (what remote callers never see): (1) everything between `<!-- private -->` and
`<!-- /private -->` (case-insensitive; an unclosed opening marker hides the rest of the text, fail
closed); (2) a private-marked section: a heading whose text ends with `(private)` hides itself and
everything up to the next heading of the same or a higher level.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_FRONTMATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_PRIVATE_BLOCK = re.compile(r"<!--\s*private\s*-->.*?(?:<!--\s*/\s*private\s*-->|\Z)", re.S | re.I)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_PRIVATE_HEADING = re.compile(r"\(\s*private\s*\)\s*$", re.I)
_MENTION = re.compile(r"\[\[([^\[\]|#]+?)(?:\|[^\[\]]*)?\]\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s")
_LINK_MD = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_WIKI = re.compile(r"\[\[([^\[\]|]+?)(?:\|([^\[\]]*))?\]\]")
# Markup pairs only: a delimiter run opens after a non-word character and before a non-space, and
# closes before a non-word character, so "MEMORY_VERBS", "snake_case" and "2*3*4" keep theirs.
_EMPHASIS = re.compile(r"(?<![\w*~])(\*\*|__|\*|_|~~)(?=\S)(.+?)(?<=\S)\1(?![\w*~])")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


class PageFormatError(ValueError):
    """Frontmatter that is not a YAML mapping. `instead` says how the writer corrects it, when the
    error has a more specific remedy than correcting the YAML at the place named."""

    def __init__(self, message: str, *, instead: str | None = None) -> None:
        super().__init__(message)
        self.instead = instead


# PyYAML ships no type stubs here, so its loader class is Any to mypy.
class _FrontmatterLoader(yaml.SafeLoader):  # type: ignore[misc]
    """The safe loader without aliases: refused at the first one, before anything is expanded."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            mark = event.start_mark
            raise PageFormatError(
                f"frontmatter uses the YAML alias *{event.anchor} (line {mark.line + 2}, column "
                f"{mark.column + 1}); aliases are not accepted in page frontmatter",
                instead="write the value out in full where the alias stands (and drop its &anchor), then "
                "put the page again; an alias repeats a value by reference, and nested aliases expand "
                "to far more than a page holds.",
            )
        return super().compose_node(parent, index)


def split_frontmatter(content: str) -> tuple[str | None, str]:
    m = _FRONTMATTER.match(content)
    if not m:
        return None, content.removeprefix("\ufeff")
    return m.group(1), content[m.end() :]


def parse_page_content(content: str) -> tuple[dict[str, Any], str]:
    raw, body = split_frontmatter(content)
    if raw is None:
        return {}, body
    try:
        data = yaml.load(raw, Loader=_FrontmatterLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2}, column {mark.column + 1})" if mark is not None else ""
        raise PageFormatError(f"frontmatter is not valid YAML{where}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PageFormatError("frontmatter must be a YAML mapping (key: value lines)")
    return {str(k): v for k, v in data.items()}, body


def render_page_content(frontmatter: dict[str, Any], body: str) -> str:
    if not frontmatter:
        return body
    text = yaml.safe_dump(frontmatter, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"---\n{text}---\n{body}"


def strip_private(text: str) -> str:
    text = _PRIVATE_BLOCK.sub("", text)
    out: list[str] = []
    hidden_level = 0  # > 0 while inside a private section opened by a heading of that level
    in_fence = False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line.rstrip("\r\n"))
        if heading:
            level = len(heading.group(1))
            if hidden_level and level <= hidden_level:
                hidden_level = 0
            if not hidden_level and _PRIVATE_HEADING.search(heading.group(2)):
                hidden_level = level
        if not hidden_level:
            out.append(line)
    return "".join(out)


def mentions(body: str) -> list[str]:
    seen: dict[str, None] = {}
    for m in _MENTION.finditer(body):
        seen.setdefault(m.group(1).strip(), None)
    return [s for s in seen if s]


def first_h1(body: str) -> str | None:
    in_fence = False
    for line in body.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        m = None if in_fence else _HEADING.match(line)
        if m and len(m.group(1)) == 1 and m.group(2).strip():
            return m.group(2).strip()
    return None


#: how much of a paragraph `first_sentence` reduces to text: the inline patterns backtrack (a run of
#: "[" or "![" costs the square of its length), so each gets a bounded prefix. A first sentence is far
#: shorter (cards clip the summary to 160 characters).
SENTENCE_SCAN_CHARS = 2000


def _without_comments(text: str) -> str:
    """`<!-- ... -->` removed, in one pass (a regex restarts its scan at every unclosed "<!--"); an
    unclosed comment is kept as written."""
    out: list[str] = []
    pos = 0
    while (start := text.find("<!--", pos)) != -1:
        end = text.find("-->", start + 4)
        if end == -1:
            break
        out.append(text[pos:start])
        pos = end + 3
    out.append(text[pos:])
    return "".join(out)


def _inline_text(text: str) -> str:
    text = _WIKI.sub(lambda m: (m.group(2) or m.group(1)).strip(), text)
    text = _LINK_MD.sub(r"\1", text)
    text = _CODE_SPAN.sub(lambda m: m.group(2).strip(), text)
    for _ in range(3):  # nested pairs: ***x***, **_x_**
        text, n = _EMPHASIS.subn(r"\2", text)
        if not n:
            break
    return " ".join(text.split())


def first_sentence(body: str) -> str:
    """The first sentence of the first prose paragraph (list items count when nothing else does)."""
    body = _without_comments(body)
    paragraphs: list[tuple[bool, str]] = []  # (is_list, text)
    current: list[str] = []
    current_list = False
    in_fence = False

    def flush() -> None:
        nonlocal current, current_list
        if current:
            paragraphs.append((current_list, " ".join(current)))
        current, current_list = [], False

    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            in_fence = not in_fence
            flush()
            continue
        if in_fence or not line or _HEADING.match(line) or line.startswith(("|", "---", "***")):
            flush()
            continue
        is_list = bool(_LIST_MARK.match(line))
        if is_list:
            flush()
            current_list = True
            line = _LIST_MARK.sub("", line)
        current.append(line.lstrip("> ").strip())
    flush()
    prose = [t for is_list, t in paragraphs if not is_list] or [t for _, t in paragraphs]
    for text in prose:
        plain = _inline_text(text[:SENTENCE_SCAN_CHARS])
        if plain:
            m = _SENTENCE_END.search(plain + " ")
            return plain[: m.start()].strip() if m else plain
    return ""


def clip(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"
