#!/usr/bin/env python3
"""The GPU performance table of issues D2 and D3, from the log of `scripts/gpu.sh --bench`.

    python3 scripts/bench_table.py BENCH_LOG [--serve DIR] [--device TEXT] [--source TEXT] > TABLE.md

BENCH_LOG holds `minfer bench latency` outputs, each after the line gpu.sh prints
before it ("--- PRESET:DTYPE --batch B --input-len 512 --output-len 128 [ARGS]").
Every row of the issues' target tables becomes a row here: the measured median,
the roofline `bench latency` printed beside it, the fraction, the target, and
whether it is met. A workload the log lacks is listed as not run. With --serve,
the serving rows come from the result JSONs scripts/serve_bench.sh wrote into DIR.
The book quotes the committed copy of this table (kernels/cuda/BENCH.md) in chapter 5.4.
"""
import json
import os
import argparse
import re
import sys

# (issue, workload, preset:dtype, batch, extra args, phase, target tok/s or None, target fraction or None)
ROWS = [
    ("D2", "llama3-8b bf16, decode batch 1", "llama3-8b:bf16", 1, "", "decode", 255, None),
    ("D2", "llama3-1b bf16, decode batch 1", "llama3-1b:bf16", 1, "", "decode", 1200, None),
    ("D2", "llama3-8b bf16, prefill 512", "llama3-8b:bf16", 1, "", "prefill", 40000, None),
    ("D2", "llama3-8b bf16, decode 64 sequences (512 + 128)", "llama3-8b:bf16", 64, "", "decode", 9000, None),
    ("D2", "llama3-8b bf16, decode 128 sequences (512 + 128)", "llama3-8b:bf16", 128, "", "decode", 14000, None),
    ("D2", "llama3-8b fp8, decode batch 1", "llama3-8b:bf16", 1, "--quantization fp8", "decode", 480, None),
    ("D2", "llama3-8b fp8, prefill 512", "llama3-8b:bf16", 1, "--quantization fp8", "prefill", 65000, None),
    ("D3", "llama3-8b Q8_0, decode batch 1", "llama3-8b:q8_0", 1, "", "decode", 400, None),
    ("D3", "llama3-8b Q4_K_M, decode batch 1", "llama3-8b:q4_k_m", 1, "", "decode", 600, None),
    ("D3", "llama3-8b Q4_K_M, prefill 512", "llama3-8b:q4_k_m", 1, "", "prefill", 25000, None),
    ("D3", "llama3-8b Q4_K_M, decode 64 sequences", "llama3-8b:q4_k_m", 64, "", "decode", None, 0.60),
]

HEADER = re.compile(r"^--- (\S+) --batch (\d+) --input-len \d+ --output-len \d+\s*(.*)$")
PREFILL = re.compile(r"^prefill .*?([\d.]+) tok/s")
DECODE = re.compile(r"^decode .*?([\d.]+) tok/s\s+\(([\d.]+) ms/step")
ROOFLINE = re.compile(r"^\s+roofline (\d+) tok/s.*?at ([\d.]+ T(?:FLOP|B)/s).*: ([\d.]+)% of it")


def parse(text):
    """{(preset:dtype, batch, args): {"prefill"|"decode": [tok/s, roofline tok/s, the limit it assumes]}}"""
    runs, current, last = {}, None, None
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            current = runs.setdefault((m.group(1), int(m.group(2)), m.group(3).strip()), {})
            last = None
            continue
        if current is None:
            continue
        if m := PREFILL.match(line):
            current["prefill"], last = [float(m.group(1)), None, ""], "prefill"
        elif m := DECODE.match(line):
            current["decode"], last = [float(m.group(1)), None, ""], "decode"
        elif (m := ROOFLINE.match(line)) and last:
            current[last][1], current[last][2] = float(m.group(1)), m.group(2)
    return runs


def fmt(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


# (name, workload): scripts/serve_bench.sh's runs.
SERVE_ROWS = [
    ("inf", "serving: 1000 prompts of 512 + 128 tokens, all at once, 128 in flight"),
    ("rate2", "serving at 2 requests/s"),
    ("rate8", "serving at 8 requests/s"),
    ("rate32", "serving at 32 requests/s"),
]
SERVE_TARGET = 25000  # total tok/s at rate inf


def serve_rows(folder):
    rows, met = [], 0
    for name, workload in SERVE_ROWS:
        path = os.path.join(folder, f"serve-{name}.json")
        if not os.path.exists(path):
            rows.append(f"| D3 | {workload} | not run | | | | |")
            continue
        with open(path) as f:
            r = json.load(f)
        latency = f"TTFT p99 {r['p99_ttft_ms']:,.0f} ms, TPOT p99 {r['p99_tpot_ms']:,.1f} ms"
        device = os.path.join(folder, f"serve-{name}.device.json")
        if os.path.exists(device):
            with open(device) as f:
                d = json.load(f)
            latency += f", GPU idle {d['device_idle_us_per_step']:,.1f} µs a step"
        if name == "inf":
            ok = r["total_token_throughput"] >= SERVE_TARGET
            met += ok
            rows.append(f"| D3 | {workload} | {fmt(r['total_token_throughput'])} total tok/s ({latency}; "
                        f"{r['completed']} of {r['num_prompts']} completed) | | | ≥ {fmt(SERVE_TARGET)} total tok/s | "
                        f"{'yes' if ok else 'no'} |")
        else:
            goodput = r.get("request_goodput")
            rows.append(f"| D3 | {workload} | goodput {goodput:.2f} of {r['request_throughput']:.2f} req/s "
                        f"({latency}; {r['num_prompts']} prompts) | | | goodput at TTFT ≤ 500 ms, TPOT ≤ 30 ms, "
                        f"reported | |")
    return rows, met


def table(runs, device, source, serve=None):
    out = [f"Measured on {device} by `scripts/gpu.sh --bench` ({source}): `minfer bench latency --device cuda "
           "--synthetic PRESET --input-len 512 --output-len 128`, random weights in the real shapes, CUDA graphs on, "
           "medians of 3 runs after a warm-up. Rooflines as `bench latency` prints them: the bytes a decode step "
           "must read at the copy bandwidth, the FLOPs of a prefill at the GEMM rate, each with the limit it "
           "assumes.", "",
           "| issue | workload | measured (tok/s) | roofline (tok/s) | fraction | target | met |",
           "|---|---|---|---|---|---|---|"]
    met = total = 0
    for issue, name, model, batch, args, phase, target, target_frac in ROWS:
        run = runs.get((model, batch, args), {}).get(phase)
        goal = f"≥ {fmt(target)} tok/s" if target else f"≥ {target_frac:.0%} of the roofline"
        total += 1
        if not run:
            out.append(f"| {issue} | {name} | not run | | | {goal} | |")
            continue
        tok_s, roof = run[0], run[1]
        frac = tok_s / roof if roof else None
        ok = tok_s >= target if target else (frac is not None and frac >= target_frac)
        met += ok
        out.append(f"| {issue} | {name} | {fmt(tok_s)} | {f'{fmt(roof)} (at {run[2]})' if roof else '?'} | "
                   f"{f'{frac:.1%}' if frac is not None else '?'} | {goal} | {'yes' if ok else 'no'} |")
    if serve:
        rows, serve_met = serve_rows(serve)
        out += rows
        met += serve_met
        total += 1  # the throughput row; the rated rows report goodput
    out += ["", f"{met} of {total} rows with a target at target."]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--device", default="the GPU machine")
    ap.add_argument("--source", default="this run")
    ap.add_argument("--serve", help="the folder of scripts/serve_bench.sh's result JSONs")
    args = ap.parse_args()
    runs = {}
    if os.path.exists(args.log):
        with open(args.log) as f:
            runs = parse(f.read())
    if not runs and not args.serve:
        sys.exit(f"bench_table: no '--- PRESET:DTYPE --batch B' sections in {args.log}")
    sys.stdout.write(table(runs, args.device, args.source, args.serve))


if __name__ == "__main__":
    main()
