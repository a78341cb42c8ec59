"""TVM's C for a model is one large file whose functions compile independently: split it into pieces
that compile in parallel. Host C pieces are linked into one library; CUDA pieces become separate
device modules (a kernel is looked up in every device module the library imports).

The file is read as a sequence of top-level items (preprocessor lines, declarations, function
definitions); string and character literals and comments are skipped when counting braces. Every
piece gets all the shared items (directives, prototypes, types) in their original order, plus its
own functions. What cannot be shared is kept consistent:
- a global variable defined in the file is defined in piece 0 and declared `extern` in the others;
- a non-static function defined in one piece is declared (its prototype) in the others;
- static variables go with the functions that use them, directly or through static helpers:
  functions that share one stay in one piece. The exception is TVM's packed-function caches
  (`static void* <name>_packed = NULL;`, filled by the first call that needs the handle), which
  every piece gets its own copy of;
- static helper functions that use no static variable (the C prelude's) are copied into every
  piece; one that does goes with that variable.

CUDA source splits by kernels (`__global__` functions); everything else (the prelude, device
helpers, types) goes to every piece. A source with variables at file scope (device state that
kernels might share) is not split.

A file the scanner does not understand (unbalanced braces, an unterminated literal) is not split.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

_CPP_WRAPPER = '#ifdef __cplusplus\nextern "C"\n#endif\n'   # a no-op in C: TVM puts it before every function
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PACKED_CACHE = re.compile(r"static\s+void\s*\*\s*([A-Za-z_][A-Za-z0-9_]*_packed)\s*=\s*NULL\s*;")
_KEYWORDS = {"static", "inline", "extern", "const", "volatile", "TVM_DLL", "__attribute__"}
#: declarations that start so define no variable
_NOT_VARIABLES = ("typedef", "struct", "union", "enum", "using", "namespace", "template", "class", "extern",
                  "static_assert")
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
#: names followed by parentheses in a function's header that are not the function's name
_NOT_NAMES = {"__launch_bounds__", "__attribute__", "__declspec", "__align__", "alignas", "decltype"}


@dataclass
class Item:
    """One top-level item of a C file: a directive, a declaration or a function definition."""

    text: str
    kind: str                      # "directive", "declaration" (or a namespace block) or "function"
    code: str = ""                 # the text without literals and comments (for names and references)
    name: str | None = None        # the function or variable it defines, if any
    static: bool = False
    refs: set[str] = field(default_factory=set)

    @property
    def defines_storage(self) -> bool:
        """A non-static, non-extern variable definition (it must exist in one piece only)."""
        return self.kind == "declaration" and self.name is not None and not self.static


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
        header_is_function = block_is_item = False
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
                if depth == 0:    # a function body, a namespace block, or an initializer's or a type's braces
                    header = _LITERAL.sub(" ", text[self.start:m.start()]).strip()
                    header_is_function = header.endswith(")")
                    block_is_item = header.split(" ", 1)[0] in ("namespace", "extern")
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth < 0:
                    raise ValueError("unbalanced braces")
                if depth == 0 and (header_is_function or block_is_item):
                    self.items.append(_item(text[self.start:pos], "function" if header_is_function else "declaration"))
                    self.start, header_is_function, block_is_item = pos, False, False
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
        item.name = next((w for w in _CALL.findall(head) if w not in _NOT_NAMES), None)
    elif "(" not in head and not code.lstrip().startswith(_NOT_VARIABLES):
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


def _state_reached(items: list[Item], state: dict[str, int], helpers: dict[str | None, int]) -> dict[int, set[str]]:
    """For each function: the static variables it uses, itself or through the static helpers it calls."""
    direct = {i: items[i].refs & state.keys() for i, it in enumerate(items) if it.kind == "function"}
    calls = {i: {helpers[n] for n in items[i].refs & helpers.keys() if helpers[n] != i} for i in direct}
    reach = {}
    for i in direct:
        seen, todo, found = {i}, [i], set()
        while todo:
            j = todo.pop()
            found |= direct[j]
            todo += [k for k in calls[j] if k not in seen]
            seen.update(calls[j])
        reach[i] = found
    return reach


def _assign(units: list[list[int]], items: list[Item], pieces: int) -> dict[int, int]:
    """Item index -> piece: units, largest first, each to the piece holding the least text so far."""
    load = [0] * min(pieces, len(units))
    owner: dict[int, int] = {}
    for members in sorted(units, key=lambda m: (-sum(len(items[i].text) for i in m), m[0])):
        target = load.index(min(load))
        load[target] += sum(len(items[i].text) for i in members)
        owner.update(dict.fromkeys(members, target))
    return owner


def split(text: str, pieces: int) -> list[str]:
    """Host C `text` as at most `pieces` files that compile separately and link into the same library."""
    if pieces <= 1:
        return [text]
    try:
        items = scan(text.replace(_CPP_WRAPPER, ""))
    except ValueError:
        return [text]
    caches = {m.group(1) for it in items if it.kind == "declaration"
              for m in [_PACKED_CACHE.fullmatch(it.code.strip())] if m}
    state = {it.name: i for i, it in enumerate(items)
             if it.static and it.kind == "declaration" and it.name and it.name not in caches}
    helpers = {it.name: i for i, it in enumerate(items) if it.static and it.kind == "function" and it.name}
    reach = _state_reached(items, state, helpers)
    # a static helper that touches no state is copied into every piece; one that does goes with it
    stateless = {i for i in helpers.values() if not reach[i]}
    groups = _Groups()
    owned = [i for i, it in enumerate(items)
             if (it.kind == "function" and i not in stateless) or i in state.values()]
    for i in owned:
        groups.find(i)
        for name in reach.get(i, ()):
            groups.union(i, state[name])
    units: dict[int, list[int]] = {}
    for i in owned:
        units.setdefault(groups.find(i), []).append(i)
    if len(units) < 2:
        return [text]
    owner = _assign(list(units.values()), items, pieces)
    out = []
    for piece in range(max(owner.values()) + 1):
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


_ENTRY_PREFIX = "__tvm_ffi_"


_ATTRIBUTES = re.compile(r"__attribute__\s*\(\(.*?\)\)")
#: a struct type's definition, with its tag (the parallel launches' closures: parallel_c.py)
_STRUCT = re.compile(r"\s*struct\s+(\w+)\s*\{")


def largest_function(text: str, extra: Callable[[str], int] = lambda _: 0) -> int:
    """The size in bytes of the largest function definition in C `text` (its whole size when its
    structure is not understood), each counted with `extra(its text)` more."""
    try:
        return max((len(item.text) + extra(item.text) for item in scan(text) if item.kind == "function"),
                   default=0)
    except ValueError:
        return len(text) + extra(text)


def _declared(item: Item) -> str | None:
    """The function a prototype declares (None for any other item)."""
    if item.kind != "declaration" or item.name is not None or "(" not in item.code:
        return None
    head = _ATTRIBUTES.sub(" ", item.code).split("(", 1)[0]
    words = [w for w in _IDENT.findall(head) if w not in _KEYWORDS]
    return words[-1] if len(words) >= 2 else None


def split_entries(text: str) -> tuple[str, str] | None:
    """Host C `text` as (its packed entry functions, the rest), two files that compile apart and link
    into the same library, or None where the entries use anything the file defines other than the
    functions they call (its state, its static helpers, its variables).

    The entries' file holds the directives and types (a struct only if they name it), the prototypes
    the entries need and the entries, nothing else: two modules with entries of the same signatures
    (calling outlined bodies: outline.py) give the same text, so its object can be shared."""
    try:
        items = scan(text.replace(_CPP_WRAPPER, ""))
    except ValueError:
        return None
    entries = {i for i, it in enumerate(items) if it.kind == "function" and (it.name or "").startswith(_ENTRY_PREFIX)}
    if not entries or len(entries) == sum(it.kind == "function" for it in items):
        return None
    defined = {it.name for it in items if it.name and (it.kind == "function" or it.kind == "declaration")}
    functions = {it.name for it in items if it.kind == "function" and not it.static}
    used = set().union(*(items[i].refs for i in entries))
    if used & (defined - functions):          # state, variables or static helpers of the file
        return None
    mine, rest = [], []
    for i, it in enumerate(items):
        declared = _declared(it)
        if i in entries:
            mine.append(it.text)
            rest.append(_stand_in(it))
        elif it.kind == "directive" or (it.kind == "declaration" and it.name is None and declared is None):
            tag = _STRUCT.match(it.code)
            mine.append(it.text if tag is None or tag.group(1) in used else "")  # directives, types they may name
            rest.append(it.text)
        elif declared is not None:            # a prototype: in the entries' file only if they need it
            mine.append(it.text if declared in used else "")
            rest.append(it.text)
        else:
            rest.append(it.text)
    return "".join(mine), "".join(rest)


def split_kernels(text: str, pieces: int) -> list[tuple[str, list[str]]]:
    """CUDA `text` as at most `pieces` sources, each with the names of the kernels it defines; the
    whole text as one piece (kernel names unknown: an empty list) when it must not be split."""
    whole = [(text, [])]
    if pieces <= 1:
        return whole
    try:
        items = scan(text)
    except ValueError:
        return whole
    kernels = [i for i, it in enumerate(items) if it.kind == "function" and "__global__" in it.refs]
    if len(kernels) < 2 or any(it.defines_storage or (it.static and it.kind == "declaration" and "(" not in it.code)
                               for it in items):
        return whole
    owner = _assign([[i] for i in kernels], items, pieces)
    out = []
    for piece in range(max(owner.values()) + 1):
        mine = [i for i in kernels if owner[i] == piece]
        source = "".join(it.text for i, it in enumerate(items) if i not in owner or owner[i] == piece)
        out.append((source, [str(items[i].name) for i in mine]))
    return out
