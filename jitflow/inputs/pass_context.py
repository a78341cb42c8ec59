"""The tvm.transform.PassContext a build lowers in: the caller's, merged with pass_config=.

jitflow.compile() records the context the caller had entered (`with PassContext(...)`); lowering
runs in it, with its opt level, required and disabled passes, instruments and config, plus the
options given as pass_config= (those win). A caller who entered no context gets jitflow's default,
opt_level=3. The key records what changes the output: opt level, required and disabled passes,
the merged config (so `PassContext(opt_level=3)` with only instruments shares the default's key).
Instruments are honoured but not keyed: they observe (timing, printing), and an instrument whose
should_run skips passes changes the output invisibly (use disabled_pass= or a cache salt).

Telling "no context entered" from "a context entered with TVM's default values" (TVM 0.27): the
context TVM returns when none is entered is one object per thread, created with the thread. A
never-entered PassContext handed to TVM's ExitPassContext is refused with one of two checks, and
neither changes anything: "context_stack.empty()" when nothing is entered, "top().same_as" when
something is. The first time a thread asks while nothing is entered, the object current() returns
is that thread's default; afterwards a comparison with it answers. If a later TVM words its checks
otherwise, a context equal to TVM's defaults (opt level 2, nothing else) counts as none entered.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator, Mapping

from ..errors import InvalidInputError
from ..logs import warn_once

DEFAULT_OPT_LEVEL = 3
_thread = threading.local()


def _nothing_entered() -> bool | None:
    """Whether this thread's stack of entered contexts is empty (None if TVM did not say)."""
    import tvm
    from tvm.ir import _ffi_transform_api

    try:
        _ffi_transform_api.ExitPassContext(tvm.transform.PassContext())
    except Exception as exc:  # always refused: the fresh context was never entered
        text = str(exc)
        if "context_stack.empty()" in text:
            return True
        if "same_as" in text:
            return False
    return None


def _is_tvm_default(ctx: Any) -> bool:
    return (int(ctx.opt_level) == 2 and not list(ctx.required_pass) and not list(ctx.disabled_pass)
            and not list(ctx.instruments) and not dict(ctx.config.items()))


def caller_context() -> Any | None:
    """The PassContext the caller has entered in this thread, or None when none is."""
    import tvm

    ctx = tvm.transform.PassContext.current()
    default = getattr(_thread, "default", None)
    if default is not None:
        return None if ctx.same_as(default) else ctx
    empty = _nothing_entered()
    if empty is None:
        return None if _is_tvm_default(ctx) else ctx
    if empty:
        _thread.default = ctx
        return None
    return ctx


def warn_if_entered_late(captured: Any | None) -> None:
    """Say once when a build is asked for (jit(), export_library(), inspect()) inside a PassContext
    that compile() did not see: the build uses the context of compile(), so this one is not used."""
    current = caller_context()
    if current is None or (captured is not None and current.same_as(captured)):
        return
    warn_once("late pass context", "jitflow: a tvm.transform.PassContext is entered around jit() (or "
              "export_library(), inspect()) but was not around jitflow.compile(): it is not used (its opt level, "
              "passes, config and instruments); jitflow builds in the context compile() was called in. Enter it "
              "around jitflow.compile()")


def check_config(pass_config: Mapping[str, Any] | None, what: str = "pass_config") -> None:
    """Refuse, as InvalidInputError, an option TVM's PassContext does not know (naming the three
    nearest it does) or a value TVM would not take: bad input, said before anything is lowered."""
    if not pass_config:
        return
    import difflib

    import tvm

    known = sorted(str(name) for name in tvm.transform.PassContext.list_configs())
    for name in pass_config:
        if not isinstance(name, str):
            raise InvalidInputError(f"{what}: option names are strings, not {type(name).__name__} ({name!r})")
        if name not in known:
            nearest = ", ".join(difflib.get_close_matches(name, known, n=3, cutoff=0))
            raise InvalidInputError(f"{what}: {name!r} is not a TVM PassContext option; the nearest are {nearest} "
                                    f"(tvm.transform.PassContext.list_configs() lists all {len(known)})")
    try:
        tvm.transform.PassContext(config=dict(pass_config))
    except Exception as exc:  # TVM checks each value against its option's type
        raise InvalidInputError(f"{what}: TVM refuses the value: {exc}") from None


def _plain(value: Any) -> Any:
    """A config value as JSON-able data (TVM containers become lists and dicts)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return [_plain(v) for v in value]
    return str(value)


def merged_config(caller: Any | None, pass_config: dict[str, Any] | None) -> dict[str, Any]:
    config = dict(caller.config.items()) if caller is not None else {}
    config.update(pass_config or {})
    return config


def key_of(caller: Any | None, pass_config: dict[str, Any] | None) -> dict[str, Any]:
    """What of the build's context goes into the key."""
    config = {str(k): _plain(v) for k, v in sorted(merged_config(caller, pass_config).items())}
    if caller is None:
        return {"opt_level": DEFAULT_OPT_LEVEL, "required": [], "disabled": [], "config": config}
    return {"opt_level": int(caller.opt_level), "required": sorted(str(p) for p in caller.required_pass),
            "disabled": sorted(str(p) for p in caller.disabled_pass), "config": config}


@contextmanager
def entered(caller: Any | None, pass_config: dict[str, Any] | None) -> Iterator[None]:
    """Run the block in the build's context: the caller's (entered again only if it is not the
    current one), a copy of it with pass_config merged in (its instruments then see one more
    enter/exit pair), or jitflow's default."""
    import tvm

    PassContext = tvm.transform.PassContext
    if caller is None:
        scope: Any = PassContext(opt_level=DEFAULT_OPT_LEVEL, config=pass_config or {})
    elif pass_config and any(caller.config.get(k) != v for k, v in pass_config.items()):
        scope = PassContext(opt_level=int(caller.opt_level), required_pass=list(caller.required_pass),
                            disabled_pass=list(caller.disabled_pass), instruments=list(caller.instruments),
                            config=merged_config(caller, pass_config))
    elif PassContext.current().same_as(caller):
        scope = nullcontext()
    else:
        scope = caller
    with scope:
        yield
