"""TVM's host C for a model is one large file whose functions compile independently: split it into
pieces that zig compiles in parallel, then links together.

The file is read as a sequence of top-level items (preprocessor lines, declarations, function
definitions); string and character literals and comments are skipped when counting braces. Every
piece gets all the shared items (directives, prototypes, types) in their original order, plus its
own functions. What cannot be shared is kept consistent:
- a global variable defined in the file is defined in piece 0 and declared `extern` in the others;
- a non-static function defined in one piece is declared (its prototype) in the others;
- static functions and static variables go with the functions that use them: functions that share
  a static stay in one piece. The one exception is TVM's packed-function caches
  (`static void* <name>_packed = NULL;`, filled by the first call that needs the handle), which
  every piece that uses them gets its own copy of.

A file the scanner does not understand (unbalanced braces, an unterminated literal) is not split.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_CPP_WRAPPER = '#ifdef __cplusplus\nextern "C"\n#endif\n'   # a no-op in C: TVM puts it before every function
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PACKED_CACHE = re.compile(r"static\s+void\s*\*\s*([A-Za-z_][A-Za-z0-9_]*_packed)\s*=\s*NULL\s*;")
_KEYWORDS = {"static", "inline", "extern", "const", "volatile", "TVM_DLL", "__attribute__"}


@dataclass
class Item:
    """One top-level item of a C file: a directive, a declaration or a function definition."""

    text: str
    kind: str                      # "directive", "declaration" or "function"
    code: str = ""                 # the text without literals and comments (for names and references)
    name: str | None = None        # the function or variable it defines, if any
    static: bool = False
    refs: set[str] = field(default_factory=set)

    @property
    def defines_storage(self) -> bool:
        """A non-static, non-extern variable definition (it must exist in one piece only)."""
        return (self.kind == "declaration" and self.name is not None and not self.static
                and not self.code.lstrip().startswith(("extern", "typedef")))


#: what the scanner stops at: literals and comments (skipped whole), braces, directives.
_TOKEN = re.compile(r'''(?=["'/{}#])(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|//[^\n]*|/\*.*?\*/|["']|/\*|[{}#])''',
                    re.S)
_LITERAL = re.compile(r'''"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|//[^\n]*|/\*.*?\*/''', re.S)


def _directive_end(text: str, i: int) -> int:
    """Index just past the directive starting at i: its line, and the lines a backslash continues."""
    while True:
        end = text.find("\n", i)
        if end < 0:
            return len(text)
        if text[end - 1:end] != "\\" and text[end - 2:end] != "\\\r":
            return end + 1
        i = end + 1


class _Scanner:
    """Walks the file once; only braces, literals, comments and (at depth 0) semicolons matter."""

    def __init__(self, text: str) -> None:
        self.text, self.items, self.start = text, [], 0

    def declarations(self, a: int, b: int) -> None:
        """Top-level text between a and b holds no literal: each ';' in it ends a declaration."""
        while (semi := self.text.find(";", a, b)) >= 0:
            self.items.append(_item(self.text[self.start:semi + 1], "declaration"))
            self.start = a = semi + 1

    def at_item_start(self, i: int) -> bool:
        """Whether only blanks precede i in the current item (a '#' there starts a directive)."""
        return not self.text[self.start:i].strip()

    def run(self) -> list[Item]:
        text, depth, pos = self.text, 0, 0
        header_is_function = False
        while (m := _TOKEN.search(text, pos)) is not None:
            tok = m.group()
            if depth == 0:
                self.declarations(pos, m.start())
            pos = m.end()
            if tok in ('"', "'", "/*"):
                raise ValueError("unterminated literal or comment")
            if depth == 0 and tok[:2] in ("#", "//", "/*") and self.at_item_start(m.start()):
                if tok == "#":
                    pos = _directive_end(text, m.start())
                self.items.append(Item(text[self.start:pos], "directive"))   # shared by every piece
                self.start = pos
            elif tok == "{":
                if depth == 0:    # a function body, or the braces of an initializer or a type
                    header_is_function = _LITERAL.sub(" ", text[self.start:m.start()]).rstrip().endswith(")")
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth < 0:
                    raise ValueError("unbalanced braces")
                if depth == 0 and header_is_function:
                    self.items.append(_item(text[self.start:pos], "function"))
                    self.start, header_is_function = pos, False
        if depth != 0:
            raise ValueError("unbalanced braces")
        self.declarations(pos, len(text))
        if text[self.start:].strip():
            raise ValueError("an unfinished item at the end")
        if text[self.start:]:
            self.items.append(Item(text[self.start:], "directive"))
        return self.items


def scan(text: str) -> list[Item]:
    """The top-level items of a C file, in order; ValueError when its structure is not understood."""
    return _Scanner(text).run()


def _item(text: str, kind: str) -> Item:
    code = _LITERAL.sub(" ", text)
    head = code.split("{", 1)[0] if kind == "function" else code.split("=", 1)[0]
    words = _IDENT.findall(head.split("(", 1)[0])
    static = "static" in words
    item = Item(text, kind, code, static=static)
    if kind == "function":
        item.name = next((w for w in reversed(words) if w not in _KEYWORDS), None)
    elif "(" not in head and not code.lstrip().startswith(("typedef", "struct", "union", "enum")):
        names = [w for w in _IDENT.findall(head.split("[", 1)[0]) if w not in _KEYWORDS]
        item.name = names[-1] if len(names) >= 2 else None     # a type, then the variable's name
    item.refs = set(_IDENT.findall(code))
    return item


def _stand_in(item: Item) -> str:
    """What a piece that does not own `item` sees instead: a prototype or an extern declaration."""
    if item.kind == "function":
        head = item.text[:item.text.index("{")].rstrip()
        return "\n" + head + ";\n" if not item.static else ""
    if item.defines_storage:
        return "\nextern " + item.text.split("=", 1)[0].strip().rstrip(";") + ";\n"
    return ""


class _Groups:
    """Union-find over item indices: functions that share a static must stay together."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, i: int) -> int:
        self.parent.setdefault(i, i)
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def split(text: str, pieces: int) -> list[str]:
    """`text` as at most `pieces` C files that compile separately and link into the same library."""
    if pieces <= 1:
        return [text]
    try:
        items = scan(text.replace(_CPP_WRAPPER, ""))
    except ValueError:
        return [text]
    caches = {m.group(1) for it in items if it.kind == "declaration" for m in [_PACKED_CACHE.fullmatch(
        it.code.strip())] if m}
    statics = {it.name: i for i, it in enumerate(items) if it.static and it.name and it.name not in caches}
    groups = _Groups()
    owned = [i for i, it in enumerate(items) if it.kind == "function" or it.name in statics.keys()]
    for i in owned:
        groups.find(i)
        for ref in items[i].refs & statics.keys():
            groups.union(i, statics[ref])
    units: dict[int, list[int]] = {}
    for i in owned:
        units.setdefault(groups.find(i), []).append(i)
    if len(units) < 2:
        return [text]
    load = [0] * min(pieces, len(units))
    owner: dict[int, int] = {}
    for members in sorted(units.values(), key=lambda m: (-sum(len(items[i].text) for i in m), m[0])):
        target = load.index(min(load))
        load[target] += sum(len(items[i].text) for i in members)
        owner.update(dict.fromkeys(members, target))
    out = []
    for piece in range(len(load)):
        parts = []
        for i, it in enumerate(items):
            if it.name in caches and it.kind == "declaration":
                parts.append(it.text)                # every piece keeps its own handle cache
            elif i in owner:
                parts.append(it.text if owner[i] == piece else _stand_in(it))
            elif it.defines_storage:
                parts.append(it.text if piece == 0 else _stand_in(it))
            else:
                parts.append(it.text)
        out.append("".join(parts))
    return out
