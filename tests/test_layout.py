"""The package's imports obey the order the README declares ("How the code is laid out"): no import
points to a later tier, and no modules import each other, even through others. Every import counts:
at module level, inside functions, and under TYPE_CHECKING."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "jitflow"

#: Import cycles known to exist and being broken elsewhere: each entry is the set of modules of one
#: cycle. Remove an entry when its cycle is gone; nothing may be added here (there are none now).
KNOWN_CYCLES: list[set[str]] = []


def declared_tiers() -> list[list[str]]:
    """The tiers of the README's import order, first (imported by all) to last."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"\*\*Import order\*\*[^`]*`([^`]+)`", text)
    assert match, "README.md has no **Import order** line in its layout section"
    return [[name.strip() for name in tier.split(",")] for tier in match.group(1).split("<")]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.AST, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The jitflow modules one import statement names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[:len(base) - node.level + 1]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix for alias in node.names]
    out = []
    for name in names:
        while name not in known and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in known and name != module:
            out.append(name)
    return out


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The jitflow modules `source` (the text of `module`) imports, wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(_targets(node, module, is_package, known))
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the jitflow modules it imports."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {m: imports_of(p.read_text(), m, p.name == "__init__.py", set(files)) for m, p in files.items()}


def _tier_name(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_every_module_has_a_declared_tier():
    declared = [name for tier in declared_tiers() for name in tier]
    assert len(declared) == len(set(declared)), "a name appears in two tiers"
    present = {_tier_name(m) for m in import_graph()}
    assert present - set(declared) == set(), "add these to the README's import order"
    assert set(declared) - present == set(), "the README's import order names modules that do not exist"


def test_no_import_points_to_a_later_tier():
    tier_of = {name: i for i, tier in enumerate(declared_tiers()) for name in tier}
    upward = sorted(f"{a} -> {b}" for a, targets in import_graph().items() for b in targets
                    if tier_of[_tier_name(b)] > tier_of[_tier_name(a)])
    assert upward == []


def test_no_import_cycles_beyond_the_known_ones():
    found = cycles(import_graph())
    assert [sorted(c) for c in found if c not in KNOWN_CYCLES] == []
    assert [sorted(c) for c in KNOWN_CYCLES if c not in found] == [], "this cycle is gone: remove it from KNOWN_CYCLES"


def test_the_checks_see_function_local_and_type_checking_imports():
    source = """
from typing import TYPE_CHECKING
from . import b
if TYPE_CHECKING:
    from .c import Thing
def f():
    from ..other import helper
    import jitflow.pkg.d
"""
    known = {"jitflow.pkg.a", "jitflow.pkg.b", "jitflow.pkg.c", "jitflow.pkg.d", "jitflow.other"}
    assert imports_of(source, "jitflow.pkg.a", False, known) == known - {"jitflow.pkg.a"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


#: the most modules `jitflow/` itself may hold (`__init__`, `__main__` and `_version` counted): the
#: contracts several stages share; every other module lives in the folder of the stage it serves
MAX_TOP_LEVEL_MODULES = 10


def test_jitflow_holds_at_most_ten_top_level_modules():
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, f"move some of these into a subpackage: {modules}"


#: the most lines one module may have: past it a module does more than one job
MAX_MODULE_LINES = 400
#: the most modules a folder of jitflow may hold directly (its __init__ counted): the rest lives in
#: rooms of the folder, one job each
MAX_FOLDER_MODULES = {"toolchain": 8, "cache": 8}
#: the module names of zig's C toolchain and of the CUDA compilers: no folder holds both kinds
ZIG_MODULES = re.compile(r"^(zig\w*|cc1_batch|compile_batch|probe_memo|object_cache|host_libs|builtins_c|link)\.py$")
CUDA_MODULES = re.compile(r"^(nvrtc|nvcc|nvjitlink|device_compiler|fatbin_build|cuda_\w+|cccl_shim|ptx_floor)\.py$")


def test_no_module_is_over_400_lines():
    long = {p.relative_to(ROOT).as_posix(): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}, "split these at a seam of their own"


def test_the_crowded_folders_keep_their_modules_in_rooms():
    for folder, most in MAX_FOLDER_MODULES.items():
        modules = sorted(p.name for p in (PACKAGE / folder).glob("*.py"))
        assert len(modules) <= most, f"jitflow/{folder} holds {len(modules)} modules: {modules}"


def test_the_toolchain_keeps_the_c_toolchain_and_the_cuda_compilers_in_rooms_of_their_own():
    for folder in {p.parent for p in (PACKAGE / "toolchain").rglob("*.py")}:
        names = [p.name for p in folder.glob("*.py")]
        zig, cuda = [n for n in names if ZIG_MODULES.match(n)], [n for n in names if CUDA_MODULES.match(n)]
        assert not (zig and cuda), f"{folder.relative_to(ROOT)} mixes zig's {zig} with the CUDA compilers' {cuda}"
    assert {p.name for p in (PACKAGE / "toolchain" / "zig_cc").glob("zig*.py")} >= {"zig.py", "zig_cache.py"}
    assert (PACKAGE / "toolchain" / "cuda" / "nvrtc.py").is_file()


def cache_rooms() -> list[list[str]]:
    """The tiers of the README's order inside the cache ("**Cache order**"), first to last: a room
    (key, store, ...) or a module of jitflow/cache itself (door, readonly, ...)."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"\*\*Cache order\*\*[^`]*`([^`]+)`", text)
    assert match, "README.md has no **Cache order** line in its layout section"
    return [[name.strip() for name in tier.split(",")] for tier in match.group(1).split("<")]


def _cache_room(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def test_the_cache_rooms_import_in_their_order():
    tier_of = {name: i for i, tier in enumerate(cache_rooms()) for name in tier}
    inside = {m: {b for b in targets if b.startswith("jitflow.cache.")} for m, targets in import_graph().items()
              if m == "jitflow.cache" or m.startswith("jitflow.cache.")}
    present = {_cache_room(m) for m in inside}
    assert present == set(tier_of), "the README's cache order and the cache's rooms differ"
    upward = sorted(f"{a} -> {b}" for a, targets in inside.items() for b in targets
                    if tier_of[_cache_room(b)] > tier_of[_cache_room(a)])
    assert upward == []


#: the module that writes and reads the bytes an entry travels as, and the per-key lock's: the door
#: (and the store, for the lock) keeps them; every other module asks the door
WIRE_FORMAT = "jitflow.cache.wire.entry_format"
LOCK = "jitflow.cache.store.key_lock"


def test_only_the_door_encodes_entries_and_only_the_store_takes_their_locks():
    graph = import_graph()
    wire = sorted(m for m, targets in graph.items() if WIRE_FORMAT in targets)
    lock = sorted(m for m, targets in graph.items() if LOCK in targets)
    assert wire == ["jitflow.cache.door"], "ask the door: door.entry_bytes / door.install_bytes"
    assert lock and all(m.startswith("jitflow.cache.store.") for m in lock), lock
    outside = sorted(f"{m} -> {b}" for m, targets in graph.items() if not m.startswith("jitflow.cache")
                     for b in targets & {WIRE_FORMAT, LOCK})
    assert outside == []


#: what moves an entry into or out of the store, or holds it there: the farm asks the door instead
STORE_MOVES = {"admit", "outgoing", "check_folder", "publish", "staging", "lock", "lookup", "entry_dir"}


def calls_of(source: str) -> set[str]:
    """The names `source` calls, bare (f()) or as an attribute (x.f())."""
    return {node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Attribute, ast.Name))}


def test_the_farms_entries_cross_into_and_out_of_the_cache_through_the_door_only():
    farm = {p.relative_to(ROOT).as_posix(): calls_of(p.read_text()) for p in (PACKAGE / "farm").rglob("*.py")}
    moves = {name: sorted(calls & STORE_MOVES) for name, calls in farm.items() if calls & STORE_MOVES}
    assert moves == {}, "ask the door (door.install_bytes, door.entry_bytes)"
    assert "install_bytes" in farm["jitflow/farm/ray_backend.py"] and "entry_bytes" in farm["jitflow/farm/worker.py"]
    assert calls_of("cache.lookup(k); door.admit(c, k); f(x)") == {"lookup", "admit", "f"}


def folder_table() -> list[str]:
    """The folders of jitflow that the README's table in "How the code is laid out" names, as paths
    relative to the repository ("jitflow/cache/shared")."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## How the code is laid out", 1)[1].split("\n## ", 1)[0]
    return [name.rstrip("/") for name in re.findall(r"^\| `(jitflow/[^`]*)` \|", section, flags=re.MULTILINE)]


def test_the_readme_folder_table_matches_the_packages():
    named = folder_table()
    assert "jitflow" in named and len(named) == len(set(named)), named
    packages = {p.parent.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("__init__.py")}
    assert sorted(set(named) - packages) == [], "the README's table names folders that are no packages"
    assert sorted(packages - set(named)) == [], "add these packages to the README's folder table"


_ENVIRON_CHANGES = {"setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__"}


def _is_os_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os")


def environ_changes(source: str) -> list[int]:
    """The lines of `source` that change this process's environment through `os`: os.environ[...] =,
    del os.environ[...], os.environ = ..., os.environ.update/setdefault/pop/..., os.putenv, os.unsetenv."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if _is_os_environ(target) or (isinstance(target, ast.Subscript) and _is_os_environ(target.value)):
                lines.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if _is_os_environ(func.value) and func.attr in _ENVIRON_CHANGES:
                lines.append(node.lineno)
            if isinstance(func.value, ast.Name) and func.value.id == "os" and func.attr in ("putenv", "unsetenv"):
                lines.append(node.lineno)
    return sorted(lines)


def test_no_module_outside_config_changes_the_environment():
    found = sorted(f"{p.relative_to(ROOT)}:{line}" for p in PACKAGE.rglob("*.py") if p != PACKAGE / "config.py"
                   for line in environ_changes(p.read_text()))
    assert found == [], "pass the value explicitly (a setting in config.py, or an argument) instead"


def test_the_environment_check_sees_every_kind_of_change():
    source = """
import os
os.environ["A"] = "1"
os.environ["A"] += "2"
del os.environ["A"]
os.environ.setdefault("B", "1")
os.environ.update(C="1")
os.environ.pop("C", None)
os.putenv("D", "1")
os.unsetenv("D")
os.environ = {}
value = os.environ.get("E")
env = dict(os.environ); env["F"] = "1"
"""
    assert environ_changes(source) == [3, 4, 5, 6, 7, 8, 9, 10, 11]
