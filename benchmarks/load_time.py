"""Time to load an exported library and get a callable, in a fresh process (run it in a runtime-only TVM).

    python benchmarks/load_time.py LIBRARY.so [--runs 10]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import time, json
t0 = time.perf_counter()
import jitflow, tvm
t1 = time.perf_counter()
m = jitflow.load({path!r})
f = m["main"]
t2 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "load": t2 - t1, "runtime_only": bool(tvm.base._RUNTIME_ONLY)}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    rows = [json.loads(subprocess.run([sys.executable, "-c", CHILD.format(path=args.library)], check=True,
                                      capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(args.runs)]
    load = statistics.median(r["load"] for r in rows)
    imp = statistics.median(r["import"] for r in rows)
    print(f"load {args.library} (runtime-only TVM: {rows[0]['runtime_only']}), median of {args.runs} fresh processes: "
          f"load + get function {load * 1000:.1f} ms (import jitflow+tvm {imp * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
