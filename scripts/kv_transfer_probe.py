#!/usr/bin/env python3
"""How fast one prompt's KV moves from a prefill to a decode instance.

Starts a prefill and a decode instance of the same model (extra serve flags
after --), then sends prompts of each length to the prefill instance with
kv_transfer_params naming the decode instance, one at a time, each prompt
distinct (no cached blocks): prints the bytes, the transfer's seconds (from
the prefill's report: connect, header, the K/V, the receiver's ack), its
bandwidth, and the time to first token of the whole prefill request. Medians
of --repeat.

  python3 scripts/kv_transfer_probe.py --minfer build/minfer --lengths 512,2048 -- --synthetic l134m:q8_0
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
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
    for s in (proc.stdout, proc.stderr):
        threading.Thread(target=lambda s=s: [None for _ in s], daemon=True).start()
    return proc, m.group(1)


def call(url, path, body=None):
    req = urllib.request.Request(url + path, json.dumps(body).encode() if body is not None else None,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minfer", default="build/minfer")
    ap.add_argument("--lengths", default="512,2048", help="prompt lengths in tokens")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("serve", nargs=argparse.REMAINDER, help="-- then flags for both instances (model, device, ...)")
    a = ap.parse_args()
    extra = [x for x in a.serve if x != "--"]
    p, purl = start([a.minfer, "serve", "--port", "0", "--kv-role", "prefill", *extra], "prefill")
    d, durl = start([a.minfer, "serve", "--port", "0", "--kv-role", "decode", "--kv-transfer-port", "0", *extra],
                    "decode")
    try:
        address = call(durl, "/v1/kv_transfer")["address"]
        print(f"| prompt tokens | KV bytes | transfer (ms) | GB/s | prefill request (ms) |")
        print(f"|---|---|---|---|---|")
        for n, length in enumerate(int(x) for x in a.lengths.split(",")):
            secs, totals, nbytes = [], [], 0
            for r in range(a.repeat + 1):  # the first is a warm-up
                ids = [100 + (n * 97 + r * 31 + i) % 5000 for i in range(length)]  # distinct per run: nothing cached
                tid = f"probe-{length}-{r}"
                began = time.perf_counter()
                out = call(purl, "/v1/completions", {"prompt": ids, "max_tokens": 1, "temperature": 0,
                                                     "kv_transfer_params": {"do_remote_decode": True,
                                                                            "remote_address": address,
                                                                            "transfer_id": tid}})
                total = time.perf_counter() - began
                rep = out["kv_transfer_params"]
                # Claim it, so the decode instance's pool does not fill with parked prompts.
                call(durl, "/v1/completions", {"prompt": ids, "max_tokens": 1, "kv_transfer_params": {"transfer_id": tid}})
                if r:
                    secs.append(rep["seconds"])
                    totals.append(total)
                    nbytes = rep["bytes"]
            s = statistics.median(secs)
            print(f"| {length} | {nbytes / 1e6:.1f} MB | {s * 1e3:.1f} | {nbytes / s / 1e9:.2f} | "
                  f"{statistics.median(totals) * 1e3:.1f} |", flush=True)
    finally:
        for proc in (p, d):
            proc.terminate()
            proc.wait(timeout=60)


if __name__ == "__main__":
    main()
