"""docs/inspect.md's JSON schema tables against what `jitflow inspect --json` really prints: every field
the output has is in the tables (and every field of the top-level, kernel and model tables is in the
output), for a CUDA library of kernels, a CPU one with a copy, and CUDA models."""
from __future__ import annotations

import contextlib
import io
import json
import re
import textwrap

import pytest
from conftest import ROOT, cache_at

from jitflow import cli

DOC = ROOT / "docs" / "inspect.md"

#: the sources inspected: each exercises fields the others leave empty
MODULES = '''
import sys
sys.path.insert(0, {examples!r})
import models
import tvm
from tvm.script import ir as I, relax as R, tirx as T

import inspect_kernel

kernels = inspect_kernel.scheduled(256)         # three kernels, two intermediates in global memory


@T.prim_func(s_tir=True)
def copy(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    T.evaluate(T.call_packed("runtime.TVMTensorCopyFromTo", A.data, B.data))


copies = tvm.IRModule({{"main": copy}})
mlp = models.mlp()                              # weights uploaded at start-up, launches per call


@I.ir_module
class ShapeFromTensor:                          # a copy in the bytecode
    @R.function
    def main(s: R.Tensor((2,), "int64"), y: R.Tensor((8,), "float32")):
        shape = R.tensor_to_shape(s)
        z = R.reshape(y, shape)
        return z
'''

SOURCES = {"kernels": ["--target", "cuda", "--arch", "sm_90"], "copies": ["--target", "c"],
           "mlp": ["--target", "cuda", "--arch", "sm_90"], "ShapeFromTensor": ["--target", "cuda", "--arch", "sm_90"]}
#: the sections printed as well (their JSON is a part of the whole one: a kernel library and a model suffice)
SECTIONS = {"kernels": ("kernels", "memory"), "mlp": ("kernels", "memory")}


def _tables() -> list[dict[str, set[str]]]:
    """The tables of the "JSON schema" section, in order: field -> the backticked words of its row."""
    text = DOC.read_text()
    section = text.split("\n## JSON schema", 1)[1].split("\n## ", 1)[0]
    tables: list[dict[str, set[str]]] = []
    current = None
    for line in section.splitlines():
        if line.startswith("| field |"):
            current = {}
            tables.append(current)
        elif line.startswith("| `") and current is not None:
            field, _type, meaning = (c.strip() for c in line.strip().strip("|").split("|"))
            current[field.strip("`")] = set(re.findall(r"`([^`]+)`", meaning))
        elif not line.startswith("|"):
            current = None
    return tables


def _shell_bullet(section: str) -> str:
    """The line of "From the shell" that says what `--section S --json` prints."""
    text = DOC.read_text()
    at = text.index(f"`--section {section} --json`")
    return text[at:text.index("`", text.index("{", at))]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, zig_cache, shared_cache):
    """`jitflow inspect SPEC --json` (and --section kernels / memory) of each source, parsed."""
    folder = tmp_path_factory.mktemp("schema")
    (folder / "mods.py").write_text(textwrap.dedent(MODULES.format(examples=str(ROOT / "examples"))))
    out: dict[str, dict] = {}
    with cache_at(shared_cache, zig_cache):
        for name, options in SOURCES.items():
            for section in (None, *SECTIONS.get(name, ())):
                more = ["--section", section] if section else []
                with contextlib.redirect_stdout(io.StringIO()) as printed:
                    assert cli.main(["inspect", f"{folder / 'mods.py'}:{name}", *options, *more, "--json"]) == 0
                out[f"{name}/{section or 'all'}"] = json.loads(printed.getvalue())
    return out


def _items(value: object) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _keys(dicts: list[dict]) -> set[str]:
    return set().union(*(d.keys() for d in dicts)) if dicts else set()


def test_the_top_level_table_lists_every_field_and_each_objects_fields(outputs):
    top, kernel, _model = _tables()
    whole = [d for name, d in outputs.items() if name.endswith("/all")]
    for d in whole:
        assert set(d) == set(top) - {"sources"}, sorted(set(d) ^ (set(top) - {"sources"}))   # --json: no sources
    seen = set()
    for field, words in top.items():
        values = [d[field] for d in whole if d.get(field) is not None]
        objects = [v for v in values if isinstance(v, dict)] + [i for v in values for i in _items(v)]
        if field in ("kernels", "symbols", "model"):       # their own table; symbol -> text
            continue
        fields = _keys(objects)
        assert fields <= words, f"{field}: {sorted(fields - words)} are not in docs/inspect.md"
        nested = _keys([i for o in objects for v in o.values() for i in _items(v)])   # compatibility.ptx
        assert nested <= words, f"{field}: {sorted(nested - words)} are not in docs/inspect.md"
        seen |= fields
    assert {"isa", "min_driver", "floor", "sass_toolkit", "call", "direction"} <= seen   # the sources reach them


def test_the_kernel_table_lists_every_field_of_a_kernel(outputs):
    _top, kernel, _model = _tables()
    kernels = [k for d in outputs.values() for k in d.get("kernels") or ()]
    assert kernels and all(set(k) == set(kernel) for k in kernels), sorted(_keys(kernels) ^ set(kernel))
    for field in ("args", "launches"):
        fields = _keys([i for k in kernels for i in k[field]])
        assert fields and fields <= kernel[field], f"kernels[].{field}: {sorted(fields - kernel[field])}"
    arch_fields = _keys([a for k in kernels for a in k["archs"].values()])
    assert arch_fields and arch_fields <= kernel["archs"], sorted(arch_fields - kernel["archs"])


def test_the_model_table_lists_every_field_of_a_model(outputs):
    top, kernel, model = _tables()
    models = [d["model"] for d in outputs.values() if d.get("model")]
    plain = {f for f in model if "[]." not in f}
    assert models and all(set(m) == plain for m in models), sorted(_keys(models) ^ plain)
    startup = _keys([m["startup"] for m in models])
    startup |= _keys([t for m in models for t in m["startup"]["tensors"]])
    assert startup <= model["startup"], sorted(startup - model["startup"])
    functions = [f for m in models for f in m["functions"]]
    assert _keys(functions) <= model["functions"], sorted(_keys(functions) - model["functions"])
    rows = {"storages": "functions[].storages", "copies": "functions[].copies", "launches": None,
            "workspaces": None}
    for part, row in rows.items():
        items = [i for f in functions for i in f[part] or ()]
        words = model[row] if row else kernel["launches"] if part == "launches" else top["allocations"]
        fields = _keys(items) | (_keys([t for i in items for t in i.get("tensors", ())]) if part == "storages"
                                 else set())
        assert fields <= words, f"{part}: {sorted(fields - words)} are not in docs/inspect.md"
        assert part == "workspaces" or fields, part          # the models reach them
    per_call = _keys([f["per_call"] for f in functions])
    assert per_call <= model["functions[].per_call"], sorted(per_call - model["functions[].per_call"])


@pytest.mark.parametrize("section", ["kernels", "memory"])
def test_a_sections_json_has_the_fields_the_doc_names(outputs, section):
    top, _kernel, _model = _tables()
    bullet = _shell_bullet(section)
    for name, d in outputs.items():
        if name.endswith(f"/{section}"):
            assert set(d) <= set(top), sorted(set(d) - set(top))
            assert all(f'"{field}"' in bullet for field in d), (sorted(d), bullet)
            whole = outputs[name.replace(f"/{section}", "/all")]
            assert all(d[field] == whole[field] for field in d)
