"""Turn what the user passed as target and arch into one normalized TargetSpec."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import TargetError
from ..logs import warn_once
from . import hosts
from .archs import normalize_arch, normalize_archs, visible_gpu_arch
from .hosts import DEFAULT_HOST, machine_host

SUPPORTED_KINDS = ("cuda", "c")
#: kinds read as another: TVM's CPU target is built as the C host (jitflow compiles host code as C)
_READ_AS = {"llvm": "c"}
_KINDS_TEXT = "cuda, c (llvm is built as c)"
#: the target compile() builds for when none is given and no tvm.target.Target is entered
DEFAULT_TARGET = "cuda"


@dataclass(frozen=True)
class TargetSpec:
    """A resolved target: its kind, the CUDA archs to build SASS for, and TVM's target config."""

    kind: str
    archs: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict, compare=False)
    host: str = DEFAULT_HOST

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    def tvm_target(self):
        """The tvm.target.Target used for lowering (C host for self.host; CUDA for the lowest arch)."""
        import tvm

        host = hosts.TVM_CONFIG[self.host]
        config = dict(self.config, **{k: v for k, v in host.items() if k != "kind"}) if self.kind == "c" \
            else self.config
        return tvm.target.Target(config, host=host)

    def describe(self) -> str:
        text = f"{self.kind} ({', '.join(self.archs)})" if self.archs else self.kind
        return text if self.host == machine_host() else f"{text} for {self.host}"

    def check_runs_here(self) -> None:
        """Raise LoadError when the library is for another CPU than this machine's (export it instead)."""
        hosts.check_runs_here(self.host)

    def canonical(self) -> str:
        """Stable text of everything about the target that decides the library's bytes."""
        return json.dumps({"config": self.config, "archs": list(self.archs), "host": self.host},
                          sort_keys=True)


def chosen(target: Any) -> Any:
    """The target a build is for: the one given, else the tvm.target.Target the caller has entered
    (`with tvm.target.Target(...)`, as tvm.compile takes it), else DEFAULT_TARGET."""
    if target is not None:
        return target
    import tvm

    return tvm.target.Target.current(allow_none=True) or DEFAULT_TARGET


def _known_kind(kind: Any, shown: Any) -> str:
    """A target kind in jitflow's spelling (any case); TargetError for one jitflow does not build (or
    one that is not text: a list or a dict is no kind)."""
    if kind is None:
        raise TargetError(f"the target {str(shown)[:60]} names no kind; give 'kind': 'cuda' or 'c'")
    if not isinstance(kind, str):
        raise TargetError(f"the target's kind must be text such as 'cuda' or 'c', not {type(kind).__name__} "
                          f"{str(kind)[:60]}; supported: {_KINDS_TEXT}")
    name = kind.strip().lower()
    if name not in SUPPORTED_KINDS and name not in _READ_AS:
        raise TargetError(f"unsupported target {shown!r}; supported: {_KINDS_TEXT}")
    return name


def _config_of(target: Any) -> tuple[dict[str, Any], bool]:
    """(TVM target config as a plain dict, whether the user named an arch in it)."""
    if isinstance(target, str):
        text = target.strip()
        if not text:
            raise TargetError("target is empty; use 'cuda' or 'c'")
        if text.startswith("{"):
            try:
                return _config_of(json.loads(text))
            except json.JSONDecodeError as exc:
                raise TargetError(f"target {target!r} is not valid JSON: {exc}") from None
        first = text.split()[0]
        if "/" in first:
            return _config_of(_tagged(text))
        kind = _known_kind(first, target)
        if first == text:
            return {"kind": kind}, False
        return _config_of(options_of(kind, text[len(first):], target))
    if isinstance(target, dict):
        config = {k: v for k, v in target.items() if k != "host"}
        config["kind"] = _known_kind(config.get("kind"), target)
        return config, "arch" in config
    if type(target).__name__ == "Target" and hasattr(target, "export"):
        config = plain(target.export())
        config.pop("host", None)
        config["kind"] = _known_kind(config.get("kind"), config.get("kind"))
        return config, "arch" in config
    raise TargetError(f"target must be a string, a dict or a tvm.target.Target, not {type(target).__name__}")


#: the warning topic of an llvm target built as the C host
LLVM_AS_C = "llvm target"


def _as_c_host(config: dict[str, Any]) -> str | None:
    """An llvm (CPU) target read as the C host, said once; the triple it names (its mtriple), if any."""
    warn_once(LLVM_AS_C, "jitflow: target %r is built as the C host 'c': jitflow compiles TVM's host code as "
              "C with zig, without LLVM (-mtriple chooses the host, -mcpu the CPU level where it names one of "
              "jitflow's, as cpu_level= does; LLVM's other options are not used). Pass 'c' to say so",
              config.get("kind"))
    return hosts.from_tvm(config)


def _tagged(text: str):
    """The tvm.target.Target a tag string such as "nvidia/nvidia-h100" names (TVM's tag registry)."""
    import tvm

    tags = sorted(tvm.target.list_tags())
    if text not in tags:
        vendor = text.split("/")[0] + "/"
        alike = [t for t in tags if t.startswith(vendor)]
        shown = ", ".join(alike[:6]) + (f" and {len(alike) - 6} more" if len(alike) > 6 else "") if alike else ""
        raise TargetError(f"TVM knows no target tag {text!r}"
                          + (f"; its {vendor} tags: {shown} (tvm.target.list_tags() lists all)" if shown
                             else "; tvm.target.list_tags() lists the tags it knows, or use 'cuda' or 'c'"))
    return tvm.target.Target(text)


#: options of TVM's former target strings ("llvm -mcpu=skylake") whose values are lists
_LIST_OPTIONS = ("keys", "libs", "mattr")


def options_of(kind: str, options: str, shown: str) -> dict[str, Any]:
    """TVM's former target string form ("cuda -arch=sm_90", "llvm -mtriple=... -mcpu=...") as the
    dict TVM takes now: each -name=value an entry (numbers as numbers, a bare -name as true)."""
    config: dict[str, Any] = {"kind": kind}
    for word in options.split():
        name, sep, value = word.lstrip("-").partition("=")
        if not word.startswith("-") or not name or (sep and not value):
            raise TargetError(f"target {shown!r}: {word!r} is not an option of the form -name=value; "
                              f"write the target as a dict, e.g. {{'kind': {kind!r}, 'arch': 'sm_90'}}"
                              if kind == "cuda" else
                              f"target {shown!r}: {word!r} is not an option of the form -name=value")
        if not sep:
            config[name] = True
        elif name in _LIST_OPTIONS:
            config[name] = [v for v in value.split(",") if v]
        else:
            config[name] = int(value) if value.lstrip("-").isdigit() else value
    return config


def host_of_target_host(value: Any) -> str | None:
    """The host triple TVM's `target_host=` names (an llvm target's mtriple, a triple; None for "c",
    "llvm" or None: this machine). A tvm.target.Target and the former string form are read too."""
    if type(value).__name__ == "Target" and hasattr(value, "export"):
        value = plain(value.export())
    elif isinstance(value, str) and len(value.split()) > 1 and not value.strip().startswith("{"):
        first = value.split()[0]
        value = options_of(first.lower(), value.strip()[len(first):], value)
    return hosts.from_tvm(value)


def plain(value: Any) -> Any:
    """TVM containers -> JSON-ready Python values."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "__iter__"):
        return [plain(v) for v in value]
    return str(value)


def _named_host(target: Any) -> str | None:
    """The host triple inside a dict or tvm.target.Target (its 'host' entry), if any."""
    if isinstance(target, str) and target.strip().startswith("{"):
        try:
            target = json.loads(target)
        except json.JSONDecodeError:
            return None   # _config_of reports it
    if isinstance(target, dict):
        host = target.get("host")
    elif type(target).__name__ == "Target" and hasattr(target, "export"):
        host = getattr(target, "host", None)
    else:
        return None
    if type(host).__name__ == "Target" and hasattr(host, "export"):
        host = plain(host.export())
    return hosts.from_tvm(host)


def resolve_target(target: Any, arch: Any = None, host: str | None = None, target_host: Any = None) -> TargetSpec:
    """Validate target + arch (+ host) and return the TargetSpec; raises TargetError with the fix.

    target: None means the entered tvm.target.Target, else DEFAULT_TARGET (chosen()); "llvm" is
    read as the C host "c", with one warning; TVM's tag strings ("nvidia/nvidia-h100") and its former
    string form ("cuda -arch=sm_90") are read as TVM reads them. host: a triple from SUPPORTED_HOSTS;
    default the target's own host (an llvm host's or llvm target's mtriple), else the machine running
    this process. target_host: TVM's name for the host, as a TVM target ("llvm -mtriple=...", a
    triple, "c"); it must agree with host= where both are given.
    """
    named = host_of_target_host(target_host)
    if named is not None:
        if host is not None and hosts.normalize(host) != named:
            raise TargetError(f"host={host!r} disagrees with target_host={target_host!r} ({named}); give one of them")
        host = named
    defaulted = target is None
    target = chosen(target)
    defaulted = defaulted and isinstance(target, str) and target == DEFAULT_TARGET
    config, named_arch = _config_of(target)
    own_host = _as_c_host(config) if config["kind"] in _READ_AS else None
    host = hosts.resolve(host, _named_host(target) or own_host)
    kind = _READ_AS.get(config["kind"], config["kind"])
    if kind == "c":
        if arch is not None:
            raise TargetError("arch= applies to the 'cuda' target only; the 'c' target has no CUDA arch")
        return TargetSpec(kind="c", config={"kind": "c"}, host=host)
    if arch is not None:
        archs = normalize_archs(arch)
    elif named_arch:
        archs = normalize_archs(config["arch"])
    else:
        found = visible_gpu_arch()
        if found is None:
            default = (f"no target was given, so it is {DEFAULT_TARGET!r} (the default), and " if defaulted
                       else "")
            raise TargetError(
                f"{default}no CUDA arch given and no GPU visible to pick one from; "
                "pass arch= (for example arch='sm_90' or arch=['sm_80', 'sm_90'])"
                + (", or target='c' to build for the CPU" if defaulted else ""))
        archs = (normalize_arch(found),)
    return TargetSpec(kind="cuda", archs=archs, config=_canonical_config(dict(config, arch=archs[0])), host=host)


def _canonical_config(config: dict[str, Any]) -> dict[str, Any]:
    """TVM's full form of a target config, so that equivalent spellings compare equal.

    The config goes to TVM as a tvm_ffi.Map: a plain dict passes through tvm_ffi.convert, whose
    isinstance check against numbers.Number walks every registered number type once per process
    (some 500 checks where torch is imported), on every cache hit's path.
    """
    import tvm
    import tvm_ffi

    try:
        full = plain(tvm.target.Target(tvm_ffi.Map(config)).export())
    except Exception as exc:
        raise TargetError(f"TVM rejects the target {config}: {exc}") from None
    full.pop("host", None)
    return full
