"""`minfer serve` while a long step runs: readiness and metrics answer during
it, and a client that leaves (streaming or not, before its prefill ends or
during generation) frees its sequence at the engine's next step.

The model is a random-weight llama of 134M parameters built in memory
(--synthetic l134m:f16, its slowest prefill of the l134m files): a
1,900-token prompt takes about two seconds on two cores, long enough to watch
from outside."""
import http.client
import json
import random
import socket
import threading
import time

import pytest

from minfer_server import Server

LONG_PROMPT = random.Random(7).choices(range(100, 30000), k=1900)


def raw_request(server, body):
    """Sends a completion request on a socket of its own and returns the socket."""
    data = json.dumps(body).encode()
    sock = socket.create_connection((server.host, server.port), timeout=30)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return sock


def counter(server, name):
    return server.metrics()[name]


def aborted(server):
    text = server.request("GET", "/metrics")[2].decode()
    for line in text.splitlines():
        if line.startswith("minfer:request_success_total") and 'finished_reason="abort"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no abort counter in /metrics")


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def one_chunk():
    """The long prompt's prefill is a single step (no step target: --max-step-ms 0)."""
    with Server("--synthetic", "l134m:f16", "--max-num-batched-tokens", 2048, "--max-step-ms", 0) as s:
        yield s


@pytest.fixture(scope="module")
def small_chunks():
    """The long prompt's prefill takes eight steps of 256 tokens."""
    with Server("--synthetic", "l134m:f16", "--max-num-batched-tokens", 256, "--max-step-ms", 0) as s:
        yield s


def test_ready_and_metrics_answer_during_a_long_step(one_chunk):
    s = one_chunk
    done = threading.Event()

    def long_request():
        s.json("POST", "/v1/completions", {"prompt": LONG_PROMPT, "max_tokens": 1}, timeout=120)
        done.set()

    threading.Thread(target=long_request, daemon=True).start()
    # The gauges show the step in progress (they used to read 0 until it ended).
    wait_for(lambda: s.metrics()["minfer:num_requests_running"] == 1 or done.is_set(), 30, "the prefill to start")
    m = s.metrics()
    assert not done.is_set(), "the prefill ended before it could be watched"
    assert m["minfer:num_requests_running"] == 1 and m["minfer:kv_cache_usage_perc"] > 0, m
    t0 = time.time()
    status, body = s.json("GET", "/ready")
    took = time.time() - t0
    in_step = not done.is_set()
    assert status == 200 and body["status"] == "ready", body
    assert took < 2.0, f"/ready took {took:.2f} s during a long step"
    if in_step:  # the canary could not run before the step ended: the step's progress answered
        assert body.get("busy") is True and body["seconds_in_step"] > 0, body
    done.wait(120)
    s.wait_idle()
    status, body = s.json("GET", "/ready")
    assert status == 200 and body["generated_tokens"] == 1


def test_a_non_streaming_client_that_leaves_is_aborted(one_chunk):
    s = one_chunk
    before_abort, before_tokens = aborted(s), counter(s, "minfer:generation_tokens_total")
    sock = raw_request(s, {"prompt": "Once upon a time", "max_tokens": 1500, "ignore_eos": True})
    wait_for(lambda: counter(s, "minfer:generation_tokens_total") > before_tokens, 30, "generation to start")
    sock.close()
    # At some ten milliseconds a token, 1,500 tokens would take seconds more.
    s.wait_idle(timeout=30)
    # The engine is idle before the connection's thread has counted the abort (see test_server's cut streams).
    wait_for(lambda: aborted(s) - before_abort >= 1, 30, "the abort to be counted")
    assert aborted(s) - before_abort == 1
    assert counter(s, "minfer:generation_tokens_total") - before_tokens < 1500


def test_a_stream_cut_during_prefill_is_aborted_at_the_next_chunk(small_chunks):
    s = small_chunks
    before_abort, before_tokens = aborted(s), counter(s, "minfer:generation_tokens_total")
    sock = raw_request(s, {"prompt": LONG_PROMPT, "max_tokens": 100, "ignore_eos": True, "stream": True})
    assert sock.recv(4096).startswith(b"HTTP/1.1 200")  # the stream began; the prefill runs
    steps = counter(s, "minfer:engine_steps_total")
    sock.close()
    s.wait_idle(timeout=60)
    wait_for(lambda: aborted(s) - before_abort >= 1, 30, "the abort to be counted")
    assert aborted(s) - before_abort == 1
    # Aborted between two chunks: its prefill never ended, so no token was sampled
    # (noticed only at its first token, it would have had one).
    assert counter(s, "minfer:generation_tokens_total") == before_tokens
    assert counter(s, "minfer:engine_steps_total") - steps < 8


def stream_times(server, body, out):
    """Streams a completion; appends its start and each chunk's arrival to out."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=300)
    conn.request("POST", "/v1/completions", json.dumps({**body, "stream": True}), {"Content-Type": "application/json"})
    response = conn.getresponse()
    out.append(time.time())
    for line in response:
        if line.startswith(b"data: {"):
            out.append(time.time())
    conn.close()


def test_a_long_prompt_does_not_stall_the_others():
    # The CPU's step target (100 ms by default) cuts the long prompt's prefill
    # into steps that fit it: a running stream keeps its pace, and a short
    # prompt that comes later is answered long before the long one.
    with Server("--synthetic", "l134m:f16") as s:
        running, long, short = [], [], []
        threads = [threading.Thread(target=stream_times, args=(s, body, out)) for body, out in [
            ({"prompt": "Once upon a time", "max_tokens": 300, "ignore_eos": True}, running),
            ({"prompt": LONG_PROMPT, "max_tokens": 1}, long)]]
        threads[0].start()
        wait_for(lambda: len(running) > 5, 30, "the stream to start")
        threads[1].start()
        wait_for(lambda: len(long) > 0, 30, "the long prompt to start")
        time.sleep(0.5)
        stream_times(s, {"prompt": "Once", "max_tokens": 2}, short)
        for t in threads:
            t.join(300)
        short_ttft, long_ttft = short[1] - short[0], long[1] - long[0]
        gaps = [b - a for a, b in zip(running[1:], running[2:]) if long[0] <= a <= long[1]]
        assert len(gaps) > 10, "the stream ended before the long prompt's prefill"
        assert short_ttft < 1.5 and short_ttft < 0.5 * long_ttft, (short_ttft, long_ttft)
        gaps.sort()
        assert gaps[len(gaps) // 2] < 0.3, f"the stream's median gap was {gaps[len(gaps) // 2]:.3f} s"
