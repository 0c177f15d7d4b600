"""What a long prompt does to the others: a stream runs, a 4,000-token prompt
arrives, then a short one. Prints the short prompt's time to first token, the
long one's, and the running stream's gaps while the long prompt is prefilled.

    python3 scripts/serve_stall.py build/minfer models/SmolLM2-135M-Instruct.Q4_1.gguf [serve flags]"""
import http.client
import json
import random
import re
import subprocess
import sys
import threading
import time

binary, model = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
proc = subprocess.Popen([binary, "serve", model, "--port", "0", *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
port = int(re.search(r":(\d+)", proc.stdout.readline()).group(1))

def stream(body, marks):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps({**body, "stream": True}), {"Content-Type": "application/json"})
    r = c.getresponse()
    t0 = time.time(); marks.append(("start", t0))
    for line in r:
        if line.startswith(b"data: ") and b"[DONE]" not in line:
            marks.append(("tok", time.time()))
    c.close()

long_prompt = random.Random(1).choices(range(1000, 40000), k=4000)
# A running stream first
runner = []
t_run = threading.Thread(target=stream, args=({"prompt": "The capital of France is", "max_tokens": 400, "ignore_eos": True, "temperature": 0}, runner)); t_run.start()
time.sleep(1.0)
long = []
t_long = threading.Thread(target=stream, args=({"prompt": long_prompt, "max_tokens": 1}, long)); t_long.start()
time.sleep(0.5)
short = []
t0 = time.time()
stream({"prompt": "Once upon a time", "max_tokens": 2, "temperature": 0}, short)
ttft = [t for k, t in short if k == "tok"][0] - t0
t_long.join(); t_run.join()
lt = [t for k, t in long if k == "tok"]
long_ttft = lt[0] - long[0][1] if lt else float("nan")
toks = [t for k, t in runner if k == "tok"]
gaps = [b - a for a, b in zip(toks, toks[1:])]
during = [g for a, g in zip(toks, gaps) if long[0][1] <= a <= (lt[0] if lt else 1e18)]
print(f"{' '.join(extra) or 'default'}: short TTFT {ttft:.2f} s; long prompt TTFT {long_ttft:.1f} s; "
      f"running stream ITL during the long prefill: max {max(during or [0])*1e3:.0f} ms, median {sorted(during)[len(during)//2]*1e3 if during else 0:.0f} ms")
proc.terminate(); proc.wait()
