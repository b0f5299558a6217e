"""Claude's client-side memory tool (`memory_20250818`) backed by fleetmem: every `/memories/...` file
is a page of the caller's tenant, reached through the typed client only (docs/claude.md).

`FleetmemMemoryTool(client)` subclasses the anthropic SDK's `BetaAbstractMemoryTool`, so it goes
wherever the SDK takes a memory tool (`client.beta.messages.run_tools(tools=[...])`). The six commands
(view, create, str_replace, insert, delete, rename) answer with the SDK's own texts and raise the
SDK's `ToolError` where its local-filesystem tool does (a missing file, a str_replace whose old_str
is absent or not unique, a path outside /memories, a `..` segment); a refusal by fleetmem (a read-only
token's write, say) is a `ToolError` carrying the envelope's code, message, fix and correlation id.

Path <-> slug (reversible, `path_to_slug` / `slug_to_path`): `/memories/a/b.md` is the page
`memories/a/bqdmd`: the namespace, then each path segment encoded on its own. Lowercase ASCII letters
and digits stand for themselves; a `-` stands for itself between two other characters; everything
else is a `q` escape: `qq` q, `qd` ".", `qu` "_", `qs` " ", `qm` "-" (first, last or doubled),
`qc` + letter an uppercase letter, `qx` + six hex digits any other character. Pages written here have
the type `memory`, which directory listings read (`list_pages(type="memory")`); a directory exists
while a file is under it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from fleetmem.client import Client, FleetmemError

ROOT = "/memories"
NAMESPACE = "memories"
PAGE_TYPE = "memory"
#: The width of the line numbers `view` prints (as the SDK's own tool prints them).
LINE_NUMBER_WIDTH = 6
LIST_LIMIT = 200
#: The refusal of a put_page whose expected_updated_at is not the stored version ("" : the page exists).
STALE = "stale_version"
_ESCAPES = {"q": "q", "d": ".", "u": "_", "s": " ", "m": "-"}
_ESCAPED = {char: "q" + code for code, char in _ESCAPES.items() if char != "-"}
_PLAIN = frozenset("abcdefghijklmnoprstuvwxyz0123456789")  # every lowercase letter but q, and digits


def encode_segment(name: str) -> str:
    """One path segment as one slug segment (lowercase letters, digits, single inner `-`)."""
    out: list[str] = []
    for i, char in enumerate(name):
        if char in _PLAIN:
            out.append(char)
        elif char == "-":
            inner = 0 < i < len(name) - 1 and name[i - 1] != "-" and name[i + 1] != "-"
            out.append("-" if inner else "qm")
        elif char in _ESCAPED:
            out.append(_ESCAPED[char])
        elif "A" <= char <= "Z":
            out.append("qc" + char.lower())
        else:
            out.append(f"qx{ord(char):06x}")
    return "".join(out)


def decode_segment(segment: str) -> str:
    """The path segment `encode_segment` made this slug segment from; ValueError for any other text."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char in _PLAIN or char == "-":
            out.append(char)
            i += 1
            continue
        code = segment[i + 1 : i + 2]
        if char != "q" or not code:
            raise ValueError(f"not an encoded path segment: {segment!r}")
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif code == "c" and "a" <= segment[i + 2 : i + 3] <= "z" and len(segment) > i + 2:
            out.append(segment[i + 2].upper())
            i += 3
        elif code == "x" and len(digits := segment[i + 2 : i + 8]) == 6:
            out.append(chr(int(digits, 16)))
            i += 8
        else:
            raise ValueError(f"not an encoded path segment: {segment!r}")
    return "".join(out)


def split_path(path: str) -> list[str]:
    """The segments under /memories (empty and `.` segments dropped); ToolError outside it or on `..`."""
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise ToolError(f"Path must start with /memories, got: {path}")
    parts = [p for p in path[len(ROOT) :].split("/") if p not in ("", ".")]
    if ".." in parts or any("\x00" in p for p in parts):
        raise ToolError(f"Path {path} would escape /memories directory")
    return parts


def path_to_slug(path: str, namespace: str = NAMESPACE) -> str:
    """The page slug of a memory path (the namespace itself for /memories)."""
    return "/".join([namespace, *(encode_segment(p) for p in split_path(path))])


def slug_to_path(slug: str, namespace: str = NAMESPACE) -> str:
    """The memory path of a page slug under the namespace; ValueError for any other slug."""
    if slug == namespace:
        return ROOT
    if not slug.startswith(namespace + "/"):
        raise ValueError(f"{slug!r} is not under {namespace!r}")
    return "/".join([ROOT, *(decode_segment(s) for s in slug[len(namespace) + 1 :].split("/"))])


def body_of(content: str) -> str:
    """A file's text from get_page's `content`: the body after the frontmatter the server renders."""
    if content.startswith("---\n"):
        end = content.find("\n---\n", 3)
        if end != -1:
            return content[end + 5 :]
    return content


def refused(err: FleetmemError) -> ToolError:
    """A fleetmem refusal as the tool error the model reads: the envelope's code, message and fix."""
    fix = json.dumps(err.fix, ensure_ascii=False, sort_keys=True)
    return ToolError(
        f"fleetmem refused this: [{err.code}] {err.message} fix: {fix} (correlation_id {err.correlation_id})"
    )


def missing(path: str) -> ToolError:
    return ToolError(f"The path {path} does not exist. Please provide a valid path.")


def numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines))


class FleetmemMemoryTool(BetaAbstractMemoryTool):
    """The memory tool over fleetmem pages of the client's tenant (see the module docstring).

    `namespace` is the slug prefix the files live under (default `memories`), e.g. `memories/ops-bot`
    for one agent's own directory tree."""

    def __init__(
        self, client: Client, *, namespace: str = NAMESPACE, cache_control: BetaCacheControlEphemeralParam | None = None
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.client = client
        self.namespace = namespace

    # ------------------------------------------------------------------ pages

    def _slug(self, path: str) -> str:
        return path_to_slug(path, self.namespace)

    def _read(self, path: str) -> tuple[str, str] | None:
        """(text, updated_at) of the file at `path`, or None when there is none."""
        if not split_path(path):
            return None
        try:
            page = self.client.get_page(slug=self._slug(path))
        except FleetmemError as err:
            if err.code == "not_found":
                return None
            raise refused(err) from None
        return body_of(page.content), page.updated_at

    def _write(self, path: str, text: str, expected_updated_at: str) -> None:
        """Store the file; `expected_updated_at` "" means it must not exist yet (else the version read)."""
        try:
            self.client.put_page(
                slug=self._slug(path),
                # an empty frontmatter first, so a file that itself starts with `---` is kept as written
                content="---\n---\n" + text,
                title=ROOT + "/" + "/".join(split_path(path)),
                type=PAGE_TYPE,
                expected_updated_at=expected_updated_at,
            )
        except FleetmemError as err:
            if (err.envelope.get("detail") or {}).get("reason") != STALE:
                raise refused(err) from None
            if expected_updated_at == "":
                raise ToolError(f"File {path} already exists") from None
            raise ToolError(f"The file {path} changed since it was read; view it again and retry.") from None

    def _remove(self, path: str) -> None:
        try:
            self.client.delete_page(slug=self._slug(path))
        except FleetmemError as err:
            if err.code != "not_found":
                raise refused(err) from None

    def _files(self) -> Iterator[str]:
        """Every file's path (listed by page type, in slug order)."""
        cursor: str | None = None
        while True:
            try:
                listed = self.client.list_pages(type=PAGE_TYPE, limit=LIST_LIMIT, cursor=cursor)
            except FleetmemError as err:
                raise refused(err) from None
            for page in listed.pages:
                try:
                    yield slug_to_path(page.slug, self.namespace)
                except ValueError:
                    continue  # a page of this type outside the namespace, or not written here
            if not listed.next_cursor:
                return
            cursor = listed.next_cursor

    def _under(self, path: str) -> list[str]:
        """The files below the directory `path` (canonical paths)."""
        prefix = ROOT + "".join("/" + p for p in split_path(path)) + "/"
        return [f for f in self._files() if f.startswith(prefix)]

    # ------------------------------------------------------------------ commands

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        found = self._read(command.path)
        if found is None:
            return self._listing(command.path)
        lines = found[0].split("\n")
        start = 1
        if command.view_range and len(command.view_range) == 2:
            first = max(1, command.view_range[0]) - 1
            last = len(lines) if command.view_range[1] == -1 else command.view_range[1]
            lines, start = lines[first:last], first + 1
        return f"Here's the content of {command.path} with line numbers:\n" + numbered(lines, start)

    def _listing(self, path: str) -> str:
        depth = len(split_path(path))
        files = self._under(path)
        if depth and not files:
            raise missing(path)
        entries: set[str] = set()
        for file in files:
            rest = file.split("/")[2 + depth :]
            for level in range(1, min(len(rest), 2) + 1):
                if rest[level - 1].startswith("."):
                    break
                entries.add("/".join(rest[:level]) + ("/" if level < len(rest) else ""))
        header = f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
        return "\n".join([header, path, *(f"{path.rstrip('/')}/{e}" for e in sorted(entries))])

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        if not split_path(command.path):
            raise ToolError(f"File {command.path} already exists")
        self._write(command.path, command.file_text, "")
        return f"File created successfully at: {command.path}"

    def _file(self, path: str) -> tuple[str, str]:
        found = self._read(path)
        if found is None:
            if split_path(path) and self._under(path):
                raise ToolError(f"The path {path} is not a file.")
            raise missing(path)
        return found

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        content, version = self._file(command.path)
        count = content.count(command.old_str)
        if count == 0:
            raise ToolError(
                f"No replacement was performed, old_str `{command.old_str}` did not appear verbatim in {command.path}."
            )
        if count > 1:
            lines, start = [], 0
            while (pos := content.find(command.old_str, start)) != -1:
                lines.append(content[:pos].count("\n") + 1)
                start = pos + 1
            raise ToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{command.old_str}` in lines: "
                f"{', '.join(map(str, lines))}. Please ensure it is unique"
            )
        changed = content[: content.find(command.old_str)].count("\n")
        new_content = content.replace(command.old_str, command.new_str)
        self._write(command.path, new_content, version)
        new_lines = new_content.split("\n")
        first, last = max(0, changed - 2), min(len(new_lines), changed + 3)
        return "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n" + (
            numbered(new_lines[first:last], first + 1)
        )

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        content, version = self._file(command.path)
        lines = content.split("\n")
        if lines[-1] == "":
            lines.pop()
        if command.insert_line < 0 or command.insert_line > len(lines):
            raise ToolError(
                f"Invalid `insert_line` parameter: {command.insert_line}. "
                f"It should be within the range [0, {len(lines)}]."
            )
        lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
        self._write(command.path, "\n".join(lines) + "\n", version)
        return f"The file {command.path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        if not split_path(command.path):
            raise ToolError("Cannot delete the /memories directory itself")
        doomed = ([command.path] if self._read(command.path) else []) + self._under(command.path)
        if not doomed:
            raise ToolError(f"The path {command.path} does not exist")
        for path in doomed:
            self._remove(path)
        return f"Successfully deleted {command.path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        old, new = split_path(command.old_path), split_path(command.new_path)
        if not old:
            raise ToolError("Cannot rename the /memories directory itself")
        if not new or self._read(command.new_path) or self._under(command.new_path):
            raise ToolError(f"The destination {command.new_path} already exists")
        moves = [(command.old_path, command.new_path)] if self._read(command.old_path) else []
        old_dir = ROOT + "".join("/" + p for p in old)
        moves += [(f, command.new_path.rstrip("/") + f[len(old_dir) :]) for f in self._under(command.old_path)]
        if not moves:
            raise ToolError(f"The path {command.old_path} does not exist")
        for source, target in moves:
            found = self._read(source)
            if found is not None:
                self._write(target, found[0], "")
                self._remove(source)
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    def clear_all_memory(self) -> str:
        for path in list(self._files()):
            self._remove(path)
        return "All memory cleared"
