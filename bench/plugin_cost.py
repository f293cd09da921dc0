"""What an op costs as a plugin: examples/plugin_op's random_cutout loaded
from its .so against the same source compiled into the program
(build/bench/plugin_cost/plugin_cost), runs interleaved, medians, and the
median of the per-run ratios plugin/builtin (1.0: no cost).

    python3 bench/plugin_cost.py --plugin build/examples/plugin_op/libsluice_cutout.so [--runs 5] [--json]

The plugin is the one ctest builds against the installed package
(InstalledPackage fixture).
"""

import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(binary, args):
    out = subprocess.run([binary] + args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["samples_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plugin", default=os.path.join(ROOT, "build/examples/plugin_op/libsluice_cutout.so"))
    p.add_argument("--binary", default=os.path.join(ROOT, "build/bench/plugin_cost/plugin_cost"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seconds", type=float, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rates = {"builtin": [], "plugin": []}
    for i in range(args.runs):
        for mode in (["builtin", "plugin"] if i % 2 == 0 else ["plugin", "builtin"]):
            flags = ["--builtin"] if mode == "builtin" else ["--plugin", args.plugin]
            rates[mode].append(run(args.binary, flags + ["--seconds", str(args.seconds)]))
        print(f"run {i + 1}: builtin {rates['builtin'][-1]:,.0f}, plugin {rates['plugin'][-1]:,.0f} samples/s",
              flush=True)
    ratios = [p / b for p, b in zip(rates["plugin"], rates["builtin"])]
    result = {"builtin": statistics.median(rates["builtin"]), "plugin": statistics.median(rates["plugin"]),
              "ratio": statistics.median(ratios), "ratios": ratios}
    print(f"random_cutout: built in {result['builtin']:,.0f}, plugin {result['plugin']:,.0f} samples/s; "
          f"plugin/builtin {result['ratio']:.3f} ({', '.join(f'{r:.3f}' for r in ratios)})")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
