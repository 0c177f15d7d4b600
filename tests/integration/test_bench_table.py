"""The scripts that turn GPU runs into the issues' table (scripts/bench_table.py,
scripts/serve_bench.sh), checked on the CPU with the bundled model: the table
must read what `minfer bench latency` and `minfer bench serve` really print."""
import json
import os
import socket
import subprocess
import sys

from conftest import MODEL, ROOT, minfer_bin, run_minfer


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def table(*args):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_table.py"), *map(str, args)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def shown(x):
    # The table's rounding: whole numbers from 100 up, one decimal below (a slow CI machine decodes
    # the bundled model at under 100 tok/s).
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def test_latency_rows_come_from_the_bench_output(tmp_path):
    # Real `bench latency` output (the CPU's, so no roofline lines), under the header gpu.sh writes.
    out = run_minfer("bench", "latency", MODEL, "--input-len", 32, "--output-len", 8, "--repetitions", 1).stdout
    decode = next(float(l.split()[6]) for l in out.splitlines() if l.startswith("decode"))
    prefill = next(float(l.split()[6]) for l in out.splitlines() if l.startswith("prefill"))
    # A baseline binary's run of the same workload (gpu.sh's BENCH_BASELINE) follows under a
    # marked header; the table must keep the run before it.
    slower = "\n".join(l.replace(l.split()[6], "1.5", 1) if l.startswith(("decode", "prefill")) else l
                       for l in out.splitlines()) + "\n"
    log = tmp_path / "bench.log"
    log.write_text("--- llama3-1b:bf16 --batch 1 --input-len 512 --output-len 128 \n" + out +
                   "--- llama3-1b:bf16 --batch 1 --input-len 512 --output-len 128  (baseline)\n" + slower +
                   "--- llama3-8b:bf16 --batch 1 --input-len 512 --output-len 128 --quantization fp8\n" + out +
                   "--- llama3-8b:bf16 --batch 1 --input-len 512 --output-len 128 --quantization fp8 (baseline)\n" +
                   slower)
    text = table(log, "--device", "a test", "--source", "here")
    rows = {l.split(" | ")[1]: l.split(" | ") for l in text.splitlines() if l.startswith("| D")}
    assert rows["llama3-1b bf16, decode batch 1"][2] == shown(decode)
    assert rows["llama3-1b bf16, decode batch 1"][3] == "?"  # the CPU prints no roofline
    assert rows["llama3-8b fp8, prefill 512"][2] == shown(prefill)
    assert rows["llama3-8b bf16, decode batch 1"][2] == "not run"
    met = (decode >= 1200) + (decode >= 480) + (prefill >= 65000)  # 1b decode; fp8 decode and prefill
    assert f"{met} of 11 rows with a target at target." in text


def test_serve_bench_script_and_its_rows(tmp_path):
    env = dict(os.environ, SERVE_BENCH_SCALE="0.02", SERVE_BENCH_INPUT="100", SERVE_BENCH_OUTPUT="16",
               SERVE_BENCH_PORT=str(free_port()))
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "serve_bench.sh"), minfer_bin(), MODEL, tmp_path / "serve"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for name in ("inf", "rate2", "rate8", "rate32"):
        result = json.loads((tmp_path / "serve" / f"serve-{name}.json").read_text())
        assert result["completed"] == result["num_prompts"] > 0 and result["failed"] == 0
        assert (tmp_path / "serve" / f"serve-{name}.svg").read_text().startswith("<svg")
        device = json.loads((tmp_path / "serve" / f"serve-{name}.device.json").read_text())
        assert device["steps"] > 0 and device["device_idle_seconds"] == 0.0  # the CPU reports no idle GPU
    text = table(tmp_path / "absent.log", "--serve", tmp_path / "serve")
    serving = [l for l in text.splitlines() if l.startswith("| D3 | serving")]
    assert len(serving) == 4 and all("not run" not in l for l in serving)
    assert "total tok/s" in serving[0] and all("goodput" in l for l in serving[1:])
    assert all("GPU idle 0.0 µs a step" in l for l in serving)
