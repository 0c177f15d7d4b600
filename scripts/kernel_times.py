#!/usr/bin/env python3
"""Per-kernel GPU time, and what bounds each kernel, from an ncu CSV
(ncu --csv --page raw --print-units base --metrics gpu__time_duration.sum[,...]).

    python3 scripts/kernel_times.py ncu.csv [--steps N] [--bandwidth BYTES_PER_S]

Prints, per kernel name, the launches, the total and mean duration and the share of
all kernel time; with --steps, the time per step (the run's decode steps), so the
sum can be set against the step time that `minfer bench latency` measures with graphs.

Where the CSV has them (scripts/gpu.sh --profile asks for them), also per kernel:
DRAM bytes over its time against --bandwidth (default the H200's measured copy rate,
4.19 TB/s), and ncu's speed-of-light figures, time-weighted: the SM's throughput
(sm__throughput: the busiest of its pipelines and issue) and the memory system's
(gpu__compute_memory_throughput: the busiest of DRAM, L2, L1 and shared memory),
each as a percentage of its peak. The larger of the two names the kernel's limiter
in the last column; both under 60% means latency (too little in flight, or waits).
"""
import argparse
import csv
import sys
from collections import defaultdict

TIME = "gpu__time_duration.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"

# To base units (seconds, bytes), for CSVs written without --print-units base.
SCALE = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1.0,
         "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "%": 1.0, "": 1.0}


def read_rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu prints its own notes first
    rows = list(csv.DictReader(lines))
    if not rows or "Kernel Name" not in rows[0] or TIME not in rows[0]:
        sys.exit(f"kernel_times: no 'Kernel Name' / {TIME} column in {path}")
    units = {}
    if rows and not rows[0]["Kernel Name"]:  # the units row
        units = rows.pop(0)
    return rows, units


def number(row, key, units):
    value = row.get(key, "").replace(",", "")
    try:
        return float(value) * SCALE.get(units.get(key, ""), 1.0)
    except ValueError:
        return None


def limiter(sm, memory):
    if sm is None or memory is None:
        return ""
    if max(sm, memory) < 60:  # ncu's rule of thumb: both under 60% of peak is latency
        return "latency"
    return "memory" if memory >= sm else "SM"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--bandwidth", type=float, default=4.19e12, help="bytes/s the DRAM column is a fraction of")
    args = ap.parse_args()
    rows, units = read_rows(args.csv)
    launches, seconds = defaultdict(int), defaultdict(float)
    dram, sm_weighted, memory_weighted = defaultdict(float), defaultdict(float), defaultdict(float)
    has = {key: key in rows[0] for key in (DRAM_READ, DRAM_WRITE, SM, MEMORY)} if rows else {}
    for row in rows:
        t = number(row, TIME, units)
        if t is None:
            continue
        name = row["Kernel Name"].split("(")[0].strip()
        launches[name] += 1
        seconds[name] += t
        dram[name] += (number(row, DRAM_READ, units) or 0.0) + (number(row, DRAM_WRITE, units) or 0.0)
        sm_weighted[name] += t * (number(row, SM, units) or 0.0)
        memory_weighted[name] += t * (number(row, MEMORY, units) or 0.0)
    grand = sum(seconds.values())
    if grand <= 0:
        sys.exit(f"kernel_times: no kernel times in {args.csv}")
    with_dram, with_sol = has.get(DRAM_READ, False), has.get(SM, False) and has.get(MEMORY, False)
    header = f"{'kernel':<60} {'launches':>8} {'total us':>11} {'mean us':>9} {'share':>6}"
    if with_dram:
        header += f" {'DRAM GB/s':>10} {'of peak':>7}"
    if with_sol:
        header += f" {'SM %':>6} {'mem %':>6}  limiter"
    print(header)
    for name in sorted(seconds, key=seconds.get, reverse=True):
        t = seconds[name]
        line = (f"{name[:60]:<60} {launches[name]:>8} {t * 1e6:>11.1f} {t * 1e6 / launches[name]:>9.2f} "
                f"{100 * t / grand:>5.1f}%")
        if with_dram:
            rate = dram[name] / t
            line += f" {rate / 1e9:>10.1f} {100 * rate / args.bandwidth:>6.1f}%"
        if with_sol:
            sm, memory = sm_weighted[name] / t, memory_weighted[name] / t
            line += f" {sm:>6.1f} {memory:>6.1f}  {limiter(sm, memory)}"
        print(line)
    total = f"{'all kernels':<60} {sum(launches.values()):>8} {grand * 1e6:>11.1f}"
    if with_dram:
        rate = sum(dram.values()) / grand
        total += f" {'':>9} {'':>6} {rate / 1e9:>10.1f} {100 * rate / args.bandwidth:>6.1f}%"
    print(total)
    if args.steps:
        print(f"per step ({args.steps} steps): {grand * 1e6 / args.steps:.1f} us of kernels, "
              f"{sum(launches.values()) / args.steps:.0f} launches")


if __name__ == "__main__":
    main()
