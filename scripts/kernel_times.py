#!/usr/bin/env python3
"""Per-kernel GPU time from an ncu CSV (ncu --csv --page raw --metrics gpu__time_duration.sum).

    python3 scripts/kernel_times.py ncu.csv [--steps N]

Prints, per kernel name, the launches, the total and mean duration and the share of
all kernel time; with --steps, the time per step (the run's decode steps), so the
sum can be set against the step time that `minfer bench latency` measures with graphs.
"""
import argparse
import csv
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=0)
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu prints its own notes first
    rows = list(csv.DictReader(lines))
    name_key = next((k for k in (rows[0] if rows else {}) if k == "Kernel Name"), None)
    time_key = next((k for k in (rows[0] if rows else {}) if k.startswith("gpu__time_duration")), None)
    if not name_key or not time_key:
        sys.exit("kernel_times: no 'Kernel Name' / gpu__time_duration column in " + args.csv)
    unit = "ns"
    launches, total = defaultdict(int), defaultdict(float)
    for row in rows:
        value = row[time_key].replace(",", "")
        try:
            t = float(value)
        except ValueError:
            unit = value or unit  # the units row
            continue
        name = row[name_key].split("(")[0].strip()
        launches[name] += 1
        total[name] += t
    scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3}.get(unit, 1e-3)
    grand = sum(total.values()) * scale
    print(f"{'kernel':<60} {'launches':>8} {'total us':>11} {'mean us':>9} {'share':>6}")
    for name in sorted(total, key=total.get, reverse=True):
        t = total[name] * scale
        print(f"{name[:60]:<60} {launches[name]:>8} {t:>11.1f} {t / launches[name]:>9.2f} {100 * t / grand:>5.1f}%")
    print(f"{'all kernels':<60} {sum(launches.values()):>8} {grand:>11.1f}")
    if args.steps:
        print(f"per step ({args.steps} steps): {grand / args.steps:.1f} us of kernels, "
              f"{sum(launches.values()) / args.steps:.0f} launches")


if __name__ == "__main__":
    main()
