"""Buffers whose elements are vectors C has no type for, made buffers of their scalars.

TVM keeps a vectorized accumulator of more than 16 lanes (or of 3) as a buffer of such vectors;
lanes.py cuts the statements reading and writing it into pieces, which needs the buffer's elements
to be scalars addressed with ramps.
"""
from __future__ import annotations

from typing import Any

from .prelude import has_c_type
from .vector_ir import CannotSplit, dtype_of, lanes_of, mutate, short


def flatten_vector_buffers(body: Any) -> Any:
    """`body` with every buffer of vector elements C has no type for (more than 16 lanes, or 3) made a
    buffer of their scalars: `acc[i]` of float32x32 becomes `acc[i*32 : i*32 + 32]` of float32."""
    import tvm
    import tvm_ffi

    prim = tvm.ir.prim.expr
    found: dict[int, tuple[Any, int]] = {}    # old buffer (a variable, by handle) -> (new buffer, lanes)

    def scan(stmt: Any) -> None:
        buffer = stmt.buffer
        dtype = buffer.dtype
        if dtype.lanes > 1 and not has_c_type(dtype) and not dtype.is_bool:
            scalar = str(dtype.with_lanes(1))
            shape = [*buffer.shape[:-1], buffer.shape[-1] * dtype.lanes] if len(buffer.shape) else [dtype.lanes]
            new = tvm.tirx.decl_buffer(shape, scalar, buffer.name, scope=buffer.scope())
            found[buffer.__chandle__()] = (new, dtype.lanes)

    def ramp(index: Any, lanes: int) -> Any:
        if lanes_of(index) != 1:
            raise CannotSplit(f"a vector index into a buffer of vectors ({short(index)})")
        dtype = dtype_of(index)
        return prim.Ramp(prim.Mul(index, prim.IntImm(dtype, lanes)), prim.IntImm(dtype, 1), lanes)

    def on_decl(stmt: Any, mutator: Any) -> Any:
        hit = found.get(stmt.buffer.__chandle__())
        if hit is None:
            return mutator.default_mutate(stmt)
        if isinstance(stmt, tvm.tirx.DeclBuffer):
            data = getattr(stmt, "data", None)
            if data is None:
                return tvm.tirx.DeclBuffer(hit[0])
            if not isinstance(data, tvm.ir.Call):
                raise CannotSplit(f"a buffer of {stmt.buffer.dtype} over another's memory ({stmt.buffer.name})")
            pointer = tvm.ir.PointerType(tvm.ir.PrimType(hit[0].dtype), hit[0].scope())   # the allocation, retyped
            data = tvm.ir.Call(data.op, [mutator.mutate(a) for a in data.args], data.attrs, data.ty_args, data.span,
                               ret_ty=pointer)
            return tvm.tirx.DeclBuffer(hit[0], data=data)
        return tvm.tirx.AllocBuffer(hit[0], annotations=stmt.annotations)

    def indices(node: Any, mutator: Any, lanes: int) -> list[Any]:
        found_indices = [mutator.mutate(i) for i in node.indices]
        return [*found_indices[:-1], ramp(found_indices[-1], lanes)]

    def on_load(node: Any, mutator: Any) -> Any:
        hit = found.get(node.source.__chandle__())
        if hit is None:
            return mutator.default_mutate(node)
        return tvm.tirx.BufferLoad(hit[0], indices(node, mutator, hit[1]))

    def on_store(stmt: Any, mutator: Any) -> Any:
        hit = found.get(stmt.buffer.__chandle__())
        if hit is None:
            return mutator.default_mutate(stmt)
        return tvm.tirx.BufferStore(hit[0], mutator.mutate(stmt.value), indices(stmt, mutator, hit[1]))

    def on_var(node: Any, _mutator: Any) -> Any:
        hit = found.get(node.__chandle__())
        return hit[0] if hit is not None else node

    decls = (tvm.tirx.DeclBuffer, tvm.tirx.AllocBuffer)
    tvm_ffi.structural_walk(body, [(decls, scan)], order="pre")
    if not found:
        return body
    return mutate(body, [(decls, on_decl), (tvm.ir.expr.TensorLoad, on_load), (tvm.tirx.BufferStore, on_store),
                         (tvm.ir.expr.Var, on_var)])
