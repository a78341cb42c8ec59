"""CPU levels: how much of its CPU a library's host code may use, and what a CPU must have to run it.

The default is each architecture's baseline (x86-64; armv8-a), which every CPU of the architecture
runs. A higher level lets the C compiler use more instructions (AVX2 and FMA at x86-64-v3, AVX-512
at x86-64-v4, SVE2 on neoverse-v2) and the library then runs only on CPUs that have them:

- x86-64-v2, -v3, -v4: the x86-64 psABI's micro-architecture levels;
- armv8.2-a, neoverse-n1 (Graviton2, Ampere Altra), neoverse-v1 (Graviton3), neoverse-v2 (Grace,
  Graviton4) for aarch64 hosts;
- native: this machine's CPU, resolved here to a concrete list (the highest level above that it
  has, plus the extensions it has that the compiler can use on its own), so that the key, and
  the shared tier, tell two CPUs apart.

A level is zig's CPU (what `-mcpu` says: a model or a level, and features added or removed) and the
features a CPU must have to run what that compiles to, named as Linux names them in /proc/cpuinfo
(x86: "flags"; aarch64: "Features", its HWCAPs). The lists hold every feature the compiler may use
without being asked (tests/targets/test_cpu_level.py checks them against the compiler's predefined
macros). Extensions the compiler reaches only through intrinsics, which TVM's C never calls, are
removed from the Arm models (crypto, random numbers, memory tagging) or not enabled (x86 native), so
a CPU that lacks them is not refused: Grace has no RNG instructions, and neoverse-v2 names them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..errors import TargetError

X86 = "x86_64-linux-gnu"
ARM = "aarch64-linux-gnu"
NATIVE = "native"
BASELINE = "baseline"
#: the default level of each host: any CPU of the architecture runs it
BASELINES = {X86: "x86-64", ARM: "armv8-a"}

_V2 = ("cx16", "lahf_lm", "pni", "popcnt", "sse4_1", "sse4_2", "ssse3")   # pni: /proc/cpuinfo's SSE3
_V3 = _V2 + ("abm", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "xsave")  # abm: LZCNT
_V4 = _V3 + ("avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl")
_ARMV82 = ("asimdrdm", "atomics", "crc32")
_N1 = _ARMV82 + ("asimddp", "asimdhp", "fphp", "lrcpc")
_V1 = _N1 + ("asimdfhm", "bf16", "fcma", "flagm", "i8mm", "ilrcpc", "jscvt", "sve", "svebf16", "svei8mm")
_NEOV2 = _V1 + ("flagm2", "frint", "sve2", "svebitperm")
#: intrinsic-only extensions taken out of the Arm models (see the module's docstring)
_ARM_INTRINSICS_ONLY = {"neoverse_n1": "-aes-sha2", "neoverse_v1": "-aes-sha2-sha3-sm4-rand",
                        "neoverse_v2": "-aes-sha2-sha3-sm4-rand-mte"}

#: host -> level name -> (zig's -mcpu, the /proc/cpuinfo features a CPU needs), lowest level first
LEVELS: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    X86: {"x86-64-v2": ("x86_64_v2", _V2), "x86-64-v3": ("x86_64_v3", _V3), "x86-64-v4": ("x86_64_v4", _V4)},
    ARM: {"armv8.2-a": ("generic+v8_2a", _ARMV82),
          **{name.replace("_", "-"): (name + minus, needs) for name, minus, needs in
             [("neoverse_n1", _ARM_INTRINSICS_ONLY["neoverse_n1"], _N1),
              ("neoverse_v1", _ARM_INTRINSICS_ONLY["neoverse_v1"], _V1),
              ("neoverse_v2", _ARM_INTRINSICS_ONLY["neoverse_v2"], _NEOV2)]}},
}

#: native on x86-64: extensions beyond the highest level that the compiler uses on its own, as
#: (zig's feature, the /proc/cpuinfo flag, the level it builds on)
_X86_EXTRAS = [("avx512ifma", "avx512ifma", "x86-64-v4"), ("avx512vbmi", "avx512vbmi", "x86-64-v4"),
               ("avx512vbmi2", "avx512_vbmi2", "x86-64-v4"), ("avx512vnni", "avx512_vnni", "x86-64-v4"),
               ("avx512bitalg", "avx512_bitalg", "x86-64-v4"),
               ("avx512vpopcntdq", "avx512_vpopcntdq", "x86-64-v4"), ("avx512bf16", "avx512_bf16", "x86-64-v4"),
               ("avx512fp16", "avx512_fp16", "x86-64-v4"), ("avxvnni", "avx_vnni", "x86-64-v3"),
               ("gfni", "gfni", None), ("adx", "adx", None)]
#: native on aarch64: zig's feature -> every /proc/cpuinfo feature it enables (LLVM's implications included)
_FP16 = ("asimdhp", "fphp")
_ARM_EXTRAS = {"lse": ("atomics",), "crc": ("crc32",), "rdm": ("asimdrdm",), "fullfp16": _FP16,
               "dotprod": ("asimddp",), "rcpc": ("lrcpc",), "rcpc_immo": ("ilrcpc", "lrcpc"),
               "complxnum": ("fcma",), "jsconv": ("jscvt",), "fptoint": ("frint",),
               "fp16fml": ("asimdfhm", *_FP16), "bf16": ("bf16",), "i8mm": ("i8mm",), "flagm": ("flagm",),
               "altnzcv": ("flagm2",), "sve": ("sve", *_FP16), "sve2": ("sve2", "sve", *_FP16),
               "sve2_bitperm": ("svebitperm", "sve2", "sve", *_FP16)}
#: two zig features together enable a third SVE feature: (a, b) -> the /proc/cpuinfo feature it needs
_ARM_PAIRS = {("sve", "bf16"): "svebf16", ("sve", "i8mm"): "svei8mm"}


@dataclass(frozen=True)
class CpuLevel:
    """A level above the baseline: its name, zig's -mcpu for it, and the features a CPU needs to run it."""

    name: str
    zig_cpu: str
    needs: tuple[str, ...]

    def describe(self) -> str:
        """'x86-64-v3', or for native what it resolved to: 'native (x86_64_v4+avx512vnni)'."""
        return f"{self.name} ({self.zig_cpu})" if self.name == NATIVE else self.name

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "zig_cpu": self.zig_cpu, "needs": list(self.needs)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> CpuLevel | None:
        if data is None:
            return None
        return cls(str(data["name"]), str(data["zig_cpu"]), tuple(sorted(data.get("needs", ()))))


def choices(host: str) -> list[str]:
    """The level names a build for `host` takes, the default first."""
    return [BASELINES[host], *LEVELS[host], NATIVE]


def _choices_text(host: str, native: bool = True) -> str:
    names = choices(host)[:None if native else -1]
    return f"{names[0]} (the default: any {host.split('-')[0]} CPU), {', '.join(names[1:])}"


def normalize(value: Any, what: str = "cpu_level") -> str | None:
    """A level's spelling -> its name ('X86_64_V3' -> 'x86-64-v3'); None (or '') is the default.

    Any name of either host is accepted here (the host is checked by resolve); anything else is a
    TargetError that lists the choices. `what` names where the value came from, for the message.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise TargetError(f"{what} must be a CPU level name such as 'x86-64-v3', not {type(value).__name__}")
    name = value.strip().lower().replace("_", "-")
    if not name:
        return None
    known = {n for host in LEVELS for n in choices(host)} | {BASELINE}
    if name not in known:
        raise TargetError(f"{what}={value!r} is not a CPU level; for x86-64 hosts: {_choices_text(X86)}; "
                          f"for aarch64 hosts: {_choices_text(ARM)}")
    return name


def resolve(value: Any, host: str, this_cpu: Callable[[], Iterable[str]], here: str | None,
            what: str = "cpu_level") -> CpuLevel | None:
    """The level a build for `host` asks for (None: the baseline). `this_cpu()` gives this machine's
    features (read only for native), `here` is this machine's host triple."""
    name = normalize(value, what)
    if name is None or name in (BASELINE, BASELINES[host]):
        return None
    if name == NATIVE:
        if host != here:
            raise TargetError(f"{what}='native' means this machine's CPU ({here or 'not a supported host'}), "
                              f"and the build is for {host}: name a level of that host: {_choices_text(host, False)}")
        return native(host, this_cpu())
    if name not in LEVELS[host]:
        other = next(h for h in LEVELS if name in choices(h))
        raise TargetError(f"CPU level {name!r} is for {other} hosts, and the build is for {host}; "
                          f"choose one of {_choices_text(host)}")
    cpu, needs = LEVELS[host][name]
    return CpuLevel(name, cpu, tuple(sorted(needs)))


def reached(host: str, features: Iterable[str]) -> str:
    """The highest named level a CPU with `features` runs (the baseline when none)."""
    have = set(features)
    best = BASELINES[host]
    for name, (_, needs) in LEVELS[host].items():
        if have.issuperset(needs):
            best = name
    return best


def native(host: str, features: Iterable[str]) -> CpuLevel:
    """native for a CPU with these /proc/cpuinfo features: a concrete zig CPU and the features it needs."""
    have = set(features)
    if host == X86:
        base = reached(X86, have)
        cpu, needs = LEVELS[X86].get(base, ("x86_64", ()))
        levels = [BASELINES[X86], *LEVELS[X86]]
        extras = [(zig, flag) for zig, flag, on in _X86_EXTRAS
                  if flag in have and (on is None or levels.index(base) >= levels.index(on))]
        spec = cpu + "".join(f"+{zig}" for zig, _ in extras)
        return CpuLevel(NATIVE, spec, tuple(sorted({*needs, *(flag for _, flag in extras)})))
    chosen = [zig for zig, needed in _ARM_EXTRAS.items() if have.issuperset(needed)]
    for (a, b), needed in _ARM_PAIRS.items():
        if a in chosen and b in chosen and needed not in have:
            chosen.remove(b)
    needs = {flag for zig in chosen for flag in _ARM_EXTRAS[zig]}
    needs |= {needed for (a, b), needed in _ARM_PAIRS.items() if a in chosen and b in chosen}
    return CpuLevel(NATIVE, "generic" + "".join(f"+{zig}" for zig in chosen), tuple(sorted(needs)))


#: what the baseline's vector code is, per host
_BASELINE_VECTORS = {X86: "SSE2: 128-bit vectors, no FMA", ARM: "NEON: 128-bit vectors"}


def speed_note(host: str, features: Iterable[str]) -> str | None:
    """What building for the baseline costs on a CPU with `features` (None where it reaches no more):
    for doctor and the build report of a library with vector code or math built for this machine."""
    best = reached(host, features)
    if best == BASELINES[host]:
        return None
    return (f"vector code and math built for the baseline use {_BASELINE_VECTORS[host]}, and this CPU runs "
            f"{best}: cpu_level='native' (or JITFLOW_CPU_LEVEL=native) builds for it, for local jit() use")


def record(level: CpuLevel | None, host: str) -> dict[str, Any]:
    """What a library's digest record states about its CPU: the level and the features it needs."""
    if level is None:
        return {"level": BASELINES[host], "needs": []}
    return {"level": level.describe(), "needs": list(level.needs)}
