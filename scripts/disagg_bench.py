#!/usr/bin/env python3
"""Colocated against disaggregated serving under one mixed load, on the CPU.

The same cores serve the same requests twice: once as one instance
(`minfer serve --threads C`), once as a prefill and a decode instance of C/2
threads each behind `minfer router`. The load mixes long prompts with short
outputs (prefill-heavy) and short prompts with long outputs (decode-heavy),
Poisson arrivals, for several shares of long prompts. `minfer bench serve`
measures each run; this script prints TTFT and TPOT (p50, p99; TPOT of the
decode-heavy requests, which a prefill beside them slows), goodput, and for
the split runs the KV transfer's share of TTFT, and writes them as JSON (the
book's figure in section 5.3 reads it).

  python3 scripts/disagg_bench.py --minfer build/minfer --out book/figures/data/disaggregation-cpu.json
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def start(cmd, what):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://[\d.]+:\d+)", line)
    if not m:
        proc.kill()
        sys.exit(f"{what} did not start: {line!r} {proc.stderr.read()}")
    for stream in (proc.stdout, proc.stderr):
        threading.Thread(target=lambda s=stream: [None for _ in s], daemon=True).start()
    return proc, m.group(1)


def get(url, path):
    with urllib.request.urlopen(url + path, timeout=30) as r:
        return r.read().decode()


def post(url, path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def metric(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def text_of(url, rng, tokens):
    """Random words that the served model's tokenizer makes about `tokens` tokens."""
    words = "the a little dog cat sun tree house river girl boy happy sad big small red blue ran saw played went".split()
    text = " ".join(rng.choice(words) for _ in range(tokens))
    while post(url, "/tokenize", {"prompt": text})["count"] > tokens:
        text = text.rsplit(" ", 1)[0]
    return text


def dataset(url, path, n, share, args, seed):
    rng = random.Random(seed)
    long_text = [text_of(url, rng, args.long_input) for _ in range(4)]
    short_text = [text_of(url, rng, args.short_input) for _ in range(8)]
    kinds = []
    with open(path, "w") as f:
        for i in range(n):
            long = rng.random() < share
            kinds.append("long" if long else "short")
            # A distinct first word, so that no two prompts share cached blocks.
            prompt = f"{i} " + rng.choice(long_text if long else short_text)
            f.write(json.dumps({"prompt": prompt, "max_tokens": args.long_output if long else args.short_output}) + "\n")
    return kinds


def pct(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q / 100
    lo = int(k)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (k - lo)


def bench(args, url, data, kinds, work):
    out = os.path.join(work, "result.json")
    cmd = [args.minfer, "bench", "serve", "--base-url", url, "--dataset", f"jsonl:{data}", "--num-prompts",
           str(len(kinds)), "--request-rate", str(args.rate), "--ignore-eos", "--seed", "0", "--disable-progress",
           "--goodput", f"ttft:{args.slo_ttft},tpot:{args.slo_tpot}", "--result-json", out]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    r = json.load(open(out))
    tpot_short = [(lat - ttft) / (o - 1) * 1e3 for lat, ttft, o, k in
                  zip(r["latencies"], r["ttfts"], r["output_lens"], kinds) if k == "short" and o > 1 and ttft > 0]
    ttfts = [t * 1e3 for t in r["ttfts"] if t > 0]
    return {"completed": r["completed"], "failed": r["failed"], "duration_s": r["duration"],
            "ttft_p50_ms": pct(ttfts, 50), "ttft_p99_ms": pct(ttfts, 99),
            "tpot_p50_ms": pct(tpot_short, 50), "tpot_p99_ms": pct(tpot_short, 99),
            "goodput_req_s": r["request_goodput"], "output_tok_s": r["output_throughput"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minfer", default="build/minfer")
    ap.add_argument("--model", help="GGUF file (default: a synthetic llama 134M in q8_0, written to a temp dir)")
    ap.add_argument("--cores", type=int, default=2, help="threads of the colocated instance; half each when split")
    ap.add_argument("--shares", default="0,0.25,0.5", help="fractions of long-prompt requests")
    ap.add_argument("--num-prompts", type=int, default=60)
    ap.add_argument("--rate", type=float, default=2.0, help="requests per second (Poisson)")
    ap.add_argument("--long-input", type=int, default=1024)
    ap.add_argument("--long-output", type=int, default=16)
    ap.add_argument("--short-input", type=int, default=32)
    ap.add_argument("--short-output", type=int, default=128)
    ap.add_argument("--slo-ttft", type=float, default=2000, help="goodput's TTFT objective, ms")
    ap.add_argument("--slo-tpot", type=float, default=100, help="goodput's TPOT objective, ms")
    ap.add_argument("--out", help="write the results as JSON")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="disagg-bench-")
    model = args.model
    if not model:
        model = os.path.join(work, "l134m-q8_0.gguf")
        subprocess.run([args.minfer, "synth", "--preset", "l134m", "--dtype", "q8_0", "-o", model], check=True,
                       capture_output=True)
    half = max(1, args.cores // 2)
    serve = [args.minfer, "serve", model, "--port", "0"]
    rows = []
    for share in [float(s) for s in args.shares.split(",")]:
        for mode in ["colocated", "split"]:
            procs = []
            try:
                if mode == "colocated":
                    p, url = start(serve + ["--threads", str(args.cores)], "serve")
                    procs.append(p)
                    prefill_url = None
                else:
                    p, prefill_url = start(serve + ["--threads", str(half), "--kv-role", "prefill"], "prefill")
                    d, decode_url = start(serve + ["--threads", str(half), "--kv-role", "decode",
                                                   "--kv-transfer-port", "0"], "decode")
                    r, url = start([args.minfer, "router", "--prefill", prefill_url, "--decode", decode_url,
                                    "--port", "0"], "router")
                    procs += [p, d, r]
                data = os.path.join(work, f"load-{share}.jsonl")
                kinds = dataset(url if mode == "colocated" else prefill_url, data, args.num_prompts, share, args, 7)
                row = {"mode": mode, "long_share": share, **bench(args, url, data, kinds, work)}
                if prefill_url:
                    m = get(prefill_url, "/metrics")
                    n = metric(m, "minfer:kv_transfer_seconds_count")
                    row["kv_transfer_mean_ms"] = metric(m, "minfer:kv_transfer_seconds_sum") / max(n, 1) * 1e3
                    row["kv_bytes_per_request"] = metric(m, "minfer:kv_transfer_bytes_total") / max(n, 1)
                rows.append(row)
                print(json.dumps(row), flush=True)
            finally:
                for proc in reversed(procs):
                    proc.terminate()
                    proc.wait(timeout=60)
    print()
    print("| long prompts | setup | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | goodput (req/s) | KV transfer (mean) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        kv = f"{r['kv_transfer_mean_ms']:.1f} ms" if "kv_transfer_mean_ms" in r else "-"
        print(f"| {r['long_share']:.0%} | {r['mode']} | {r['ttft_p50_ms']:.0f} ms | {r['ttft_p99_ms']:.0f} ms | "
              f"{r['tpot_p50_ms']:.1f} ms | {r['tpot_p99_ms']:.1f} ms | {r['goodput_req_s']:.2f} | {kv} |")
    if args.out:
        meta = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} CPU cores",
                "command": "python3 scripts/disagg_bench.py " + " ".join(sys.argv[1:]), "model": os.path.basename(model),
                "load": {k: getattr(args, k) for k in ["num_prompts", "rate", "long_input", "long_output", "short_input",
                                                       "short_output", "slo_ttft", "slo_tpot", "cores"]}}
        with open(args.out, "w") as f:
            json.dump({**meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
