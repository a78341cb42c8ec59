"""A build request's IR, as TVM's JSON object graph, checked before TVM reads it.

tvm-ffi's reader decodes a graph from its root, following each reference as it meets it, by
recursion, with no check of its own: a node that refers to itself (or to any node that leads back
to it) recurses until the stack is gone, and so does a chain a few thousand nodes deep, which kills
the worker with SIGSEGV. TVM's writer puts every node after the nodes it refers to, so a graph it
wrote refers only backwards. check() holds a graph to that, and to bounds:

- the document is an object with `root_index` and a list of `nodes` (at most MAX_NODES);
- each node is an object with a `type` naming a type this process knows;
- an array's or a list's elements, a map's keys and values, and each field of an object that TVM
  stores as a reference (as its reflection says: not an int, bool, float or dtype written in
  place) are indices of earlier nodes;
- the longest chain of references from the root is at most MAX_DEPTH nodes (the IR of real
  kernels and models is a few tens deep; tvm-ffi's reader overflowed its stack at about 2500).

Anything else is a BadGraph that says which node is wrong and how; the worker answers it as an
error, and the caller builds the item itself.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

#: bounds on a graph: nodes, and the longest chain of references from the root
MAX_NODES, MAX_DEPTH = 10_000_000, 1000
#: tvm-ffi's type indices of the values an object field holds in place (None, int, bool, float, dtype)
_IN_PLACE = frozenset({0, 1, 2, 3, 5})
#: the kinds whose data is a value, and those whose data is a list of references
_VALUES = frozenset({"None", "bool", "int", "float", "DataType", "Device", "ffi.String", "ffi.Bytes", "ffi.Shape"})
_SEQUENCES = frozenset({"ffi.Array", "ffi.List", "ffi.Map"})


class BadGraph(ValueError):
    """The JSON is not an object graph TVM's writer makes; the message says where."""


@lru_cache(maxsize=None)
def _reference_fields(type_key: str) -> frozenset[str] | None:
    """The fields of `type_key` that TVM stores as node indices, or None for a type this process does
    not know (TVM's reader would refuse it too, but only after recursing into what it holds)."""
    import tvm  # noqa: F401  (registers TVM's types with tvm-ffi)
    from tvm_ffi import core

    try:
        info = core._lookup_or_register_type_info_from_type_key(type_key)
    except Exception:  # noqa: BLE001 - an unknown type key
        return None
    fields: set[str] = set()
    while info is not None:
        fields |= {f.name for f in info.fields if f.field_static_type_index not in _IN_PLACE}
        info = info.parent_type_info
    return frozenset(fields)


def _references(index: int, node: Any) -> list[Any]:
    """What node `index` refers to, as its JSON holds them (checked by the caller)."""
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise BadGraph(f"node {index} is not an object with a type")
    kind, data = node["type"], node.get("data")
    if kind in _VALUES:
        return []
    if kind in _SEQUENCES:
        if not isinstance(data, list) or (kind == "ffi.Map" and len(data) % 2):
            raise BadGraph(f"node {index} ({kind}) does not hold a list of node indices")
        return data
    fields = _reference_fields(kind)
    if fields is None:
        raise BadGraph(f"node {index} is of type {kind[:80]!r}, which this TVM does not know")
    if not isinstance(data, dict):
        return []                           # a type that writes its own data (a tensor: base64)
    return [data[name] for name in fields if name in data]


def parse(text: str) -> Any:
    """The JSON of a request's IR (BadGraph when it is not JSON), to check() and hand to TVM."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadGraph(f"the IR is not JSON ({str(exc)[:120]})") from None


def check(graph: Any) -> None:
    """Raise BadGraph unless `graph` (parsed JSON) is one TVM can read without harm (see the module's
    docstring)."""
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        raise BadGraph("the IR is not a TVM object graph (no list of nodes)")
    nodes, root = graph["nodes"], graph.get("root_index")
    if len(nodes) > MAX_NODES:
        raise BadGraph(f"the IR has {len(nodes)} nodes, more than {MAX_NODES}")
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < len(nodes):
        raise BadGraph(f"its root_index {str(root)[:40]} is not one of its {len(nodes)} nodes")
    depth = [0] * len(nodes)
    for index, node in enumerate(nodes):
        deepest = 0
        for ref in _references(index, node):
            if isinstance(ref, bool) or not isinstance(ref, int) or not 0 <= ref < index:
                what = "itself" if ref == index else f"node {str(ref)[:40]}"
                raise BadGraph(f"node {index} ({node['type'][:80]}) refers to {what}: a graph TVM writes refers "
                               "only to earlier nodes (a cycle would crash TVM's reader)")
            deepest = max(deepest, depth[ref])
        depth[index] = deepest + 1
        if depth[index] > MAX_DEPTH:
            raise BadGraph(f"node {index} ends a chain of {depth[index]} references, more than {MAX_DEPTH}")
