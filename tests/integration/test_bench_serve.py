"""minfer bench serve without a server of ours: bad flags, an unreachable server, the datasets.

`run_bench` and `check_result` are the helpers for runs against a real server: `check_result`
recomputes every summary number of the result JSON from its per-request arrays with numpy, as
vLLM's calculate_metrics does, so a run proves its own metrics. They were checked by hand against
`minfer serve` and a stand-in OpenAI server. Set MINFER_BENCH_BASE_URL to run `test_live_server`
against any OpenAI-compatible server."""
import json
import os
import socket

import numpy as np
import pytest

from conftest import run_minfer


def run_bench(base_url, *args, result_path, timeout=300):
    """Runs `minfer bench serve` against base_url; returns (CompletedProcess, result dict or None)."""
    proc = run_minfer("bench", "serve", "--base-url", base_url, "--disable-progress", "--result-json", result_path,
                      *args, check=False, timeout=timeout)
    result = json.loads(open(result_path).read()) if os.path.exists(result_path) else None
    return proc, result


def check_result(r, num_prompts):
    """The result JSON is self-consistent and its numbers follow vLLM's definitions."""
    n = num_prompts
    for key in ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "errors",
                "generated_texts"):
        assert len(r[key]) == n, key
    ok = [e == "" for e in r["errors"]]
    assert r["completed"] == sum(ok) and r["failed"] == n - sum(ok)
    assert all(o == 0 for o, good in zip(r["output_lens"], ok) if not good)
    assert r["total_input_tokens"] == sum(l for l, good in zip(r["input_lens"], ok) if good)
    assert r["total_output_tokens"] == sum(r["output_lens"])
    d = r["duration"]
    assert d > 0
    assert r["request_throughput"] == pytest.approx(r["completed"] / d)
    assert r["output_throughput"] == pytest.approx(r["total_output_tokens"] / d)
    assert r["total_token_throughput"] == pytest.approx((r["total_input_tokens"] + r["total_output_tokens"]) / d)

    ttfts = [t for t, good in zip(r["ttfts"], ok) if good]
    e2els = [t for t, good in zip(r["latencies"], ok) if good]
    itls = [x for i, good in zip(r["itls"], ok) if good for x in i]
    tpots = [(lat - ttft) / (out - 1) for lat, ttft, out, good in
             zip(r["latencies"], r["ttfts"], r["output_lens"], ok) if good and out > 1]
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        v = values or 0
        assert r[f"mean_{name}_ms"] == pytest.approx(np.mean(v) * 1000, rel=1e-6, abs=1e-9), name
        assert r[f"median_{name}_ms"] == pytest.approx(np.median(v) * 1000, rel=1e-6, abs=1e-9), name
        assert r[f"std_{name}_ms"] == pytest.approx(np.std(v) * 1000, rel=1e-6, abs=1e-9), name
        assert r[f"p90_{name}_ms"] == pytest.approx(np.percentile(v, 90) * 1000, rel=1e-6, abs=1e-9), name
        assert r[f"p99_{name}_ms"] == pytest.approx(np.percentile(v, 99) * 1000, rel=1e-6, abs=1e-9), name
    for ttft, itl, lat, good in zip(r["ttfts"], r["itls"], r["latencies"], ok):
        if good:  # the last chunk's time is the TTFT plus every gap
            assert 0 < ttft <= lat and lat == pytest.approx(ttft + sum(itl), abs=1e-6)
    for key in ("date", "backend", "model_id", "num_prompts", "request_rate", "burstiness", "max_concurrency"):
        assert key in r, key
    assert r["num_prompts"] == n


def free_port():
    """A port nothing listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_one_line_failure(proc, code, *needles):
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("args,needle", [
    (["--request-rate", "0"], "--request-rate"),
    (["--request-rate", "fast"], "fast"),
    (["--burstiness", "0"], "--burstiness"),
    (["--num-prompts", "0"], "--num-prompts"),
    (["--random-input-len", "0"], "--random-input-len"),
    (["--random-range-ratio", "1"], "--random-range-ratio"),
    (["--goodput", "ttft"], "--goodput"),
    (["--goodput", "latency:5"], "latency"),
    (["--dataset", "csv:x"], "--dataset"),
    (["--dataset", "sharegpt:"], "--dataset"),
    (["--base-url", "https://127.0.0.1:1"], "https"),
    (["--base-url", "127.0.0.1:8000"], "http://"),
    (["--max-concurrency", "0"], "--max-concurrency"),
    (["--timeout", "0"], "--timeout"),
    (["--endpoint", "v1/completions"], "--endpoint"),
    (["--extra-body", "[1]"], "--extra-body"),
    (["--extra-body", "{temperature"], "--extra-body"),
    (["--no-such-flag"], "no-such-flag"),
])
def test_bad_flags(args, needle):
    proc = run_minfer("bench", "serve", "--model", "m", *args, check=False)
    assert_one_line_failure(proc, 2, needle)


def test_help_and_bench_dispatch():
    assert "--request-rate" in run_minfer("bench", "serve", "--help").stdout
    assert "serve" in run_minfer("bench", "--help").stdout
    assert_one_line_failure(run_minfer("bench", "nosuch", check=False), 2, "latency, serve")


def test_missing_files(tmp_path):
    proc = run_minfer("bench", "serve", "--model", "m", "--dataset", f"jsonl:{tmp_path}/absent.jsonl", check=False)
    assert_one_line_failure(proc, 1, "absent.jsonl")
    proc = run_minfer("bench", "serve", "--model", "m", "--tokenizer", tmp_path / "absent.gguf", check=False)
    assert_one_line_failure(proc, 1, "absent.gguf")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n{"max_tokens": 3}\n')
    assert_one_line_failure(run_minfer("bench", "serve", "--model", "m", "--dataset", f"jsonl:{bad}", check=False),
                            1, "bad.jsonl:2")


def test_nothing_listening_fails_every_request_and_still_reports(tmp_path):
    port = free_port()
    out = tmp_path / "r.json"
    svg = tmp_path / "r.svg"
    proc, r = run_bench(f"http://127.0.0.1:{port}", "--model", "m", "--num-prompts", 6, "--random-input-len", 20,
                        "--max-concurrency", 2, "--plot", tmp_path / "r", result_path=out)  # .svg is added
    assert proc.returncode == 1, proc.stderr  # nothing succeeded
    assert "Serving Benchmark Result" in proc.stdout and "Failed requests:" in proc.stdout
    assert "Connection refused" in proc.stderr
    assert r["completed"] == 0 and r["failed"] == 6
    assert all("Connection refused" in e for e in r["errors"])
    assert r["input_lens"] == [20] * 6  # the prompts' lengths under the tokenizer
    assert r["max_concurrency"] == 2 and r["request_rate"] == "inf" and r["model_id"] == "m"
    check_result(r, 6)
    text = svg.read_text()
    assert text.startswith("<svg") and text.rstrip().endswith("</svg>")


def test_model_lookup_needs_a_server():
    proc = run_minfer("bench", "serve", "--base-url", f"http://127.0.0.1:{free_port()}", "--num-prompts", 1,
                      check=False)
    assert_one_line_failure(proc, 1, "/v1/models", "--model")


def test_datasets_are_read(tmp_path):
    share = tmp_path / "sharegpt.json"
    share.write_text(json.dumps([
        {"conversations": [{"from": "human", "value": "Once upon a time there was a little girl named Lily."},
                           {"from": "gpt", "value": "She liked to play in the park with her dog every day."}]},
        {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello there, how are you?"}]},
        {"conversations": [{"from": "system", "value": "ignored"},
                           {"from": "human", "value": "Tell me a story about a big red ball in the sun."},
                           {"from": "gpt", "value": "The ball was red and it was very big and round."}]},
        {"conversations": [{"from": "human", "value": "no answer follows this one at all"}]},
    ]))
    port = free_port()
    proc, r = run_bench(f"http://127.0.0.1:{port}", "--model", "m", "--dataset", f"sharegpt:{share}",
                        "--num-prompts", 10, result_path=tmp_path / "s.json")
    assert r is not None, proc.stderr
    assert r["num_prompts"] == 2  # "Hi" is too short, the last has no answer
    assert "2 usable prompts" in proc.stderr

    lines = tmp_path / "p.jsonl"
    lines.write_text('{"prompt": "Lily went to the park", "max_tokens": 8}\n\n{"prompt": "The sun"}\n')
    proc, r = run_bench(f"http://127.0.0.1:{port}", "--model", "m", "--dataset", f"jsonl:{lines}",
                        "--request-rate", 100, "--burstiness", 2, result_path=tmp_path / "j.json")
    assert r["num_prompts"] == 2 and r["request_rate"] == 100 and r["burstiness"] == 2
    assert r["input_lens"][0] > r["input_lens"][1] > 0


@pytest.mark.skipif(not os.environ.get("MINFER_BENCH_BASE_URL"), reason="set MINFER_BENCH_BASE_URL to a live server")
@pytest.mark.parametrize("endpoint", ["/v1/completions", "/v1/chat/completions"])
def test_live_server(tmp_path, endpoint):
    proc, r = run_bench(os.environ["MINFER_BENCH_BASE_URL"], "--endpoint", endpoint, "--num-prompts", 40,
                        "--random-input-len", 32, "--random-output-len", 16, "--request-rate", 40,
                        "--max-concurrency", 16, "--goodput", "ttft:10000", result_path=tmp_path / "r.json")
    assert proc.returncode == 0, proc.stderr
    assert r["completed"] == 40, r["errors"][:3]
    assert r["request_goodput"] is not None
    check_result(r, 40)
