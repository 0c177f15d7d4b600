"""`minfer router`, the prefill/decode disaggregation proxy: its flags, its own
answers (400, 401, 404, 405, 503, /health, /metrics), and the flow of a
request through a prefill and a decode instance with what goes wrong on the
way: instances down at start, killed and restarted, failing with 4xx, 5xx or
kv_transfer_error, a decode stream that breaks off, a client that leaves.

Every instance is a real `minfer serve --kv-role prefill|decode`: the bundled
model where speed does not matter, a synthetic 134M model where a stream or a
prefill must last long enough to be cut off. (test_disaggregation.py checks
64 mixed requests through the router against one instance.)"""
import json
import signal
import re
import socket
import subprocess
import threading
import time

import pytest

from conftest import run_minfer
from minfer_server import DEVICE, ROOT, Client, ListeningProcess, Router, Server, minfer_bin

def wait_for(condition, timeout=5.0, what="the condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def wait_all_up(router, role, urls):
    """Instances are down until their first health check; a test that stops one must let that check
    finish first, or the router never picks it and nothing is retried."""
    wait_for(lambda: all(router.up(role, u) == 1 for u in urls), what=f"every {role} instance up")


def refused_url():
    """A URL where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def assert_openai_error(body, code):
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["code"] == code and body["error"]["message"]


# ---- flags ---------------------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    ([], "--prefill is required"),
    (["--prefill", "http://127.0.0.1:1"], "--decode is required"),
    (["--decode", "http://127.0.0.1:1"], "--prefill is required"),
    (["--prefill", "ftp://x", "--decode", "http://127.0.0.1:2"], "--prefill: a base URL starts with http://"),
    (["--prefill", "http://127.0.0.1:1", "--decode", "https://h:2"], "--decode: https is not supported"),
    (["--prefill", "http://127.0.0.1:99999", "--decode", "http://127.0.0.1:2"], "bad port"),
    (["--prefill", "http://a:1", "--decode", "http://b:2", "http://b:2"], "--decode names http://b:2 twice"),
    (["--prefill", "http://a:1", "--decode", "http://b:2", "--policy", "random"],
     "--policy must be round-robin or least-loaded"),
    (["--prefill", "http://a:1", "--decode", "http://b:2", "--health-interval", "0"], "--health-interval must be"),
    (["--prefill", "http://a:1", "--decode", "http://b:2", "--request-timeout", "soon"], "--request-timeout must be"),
    (["--prefill", "http://a:1", "--decode", "http://b:2", "--port", "70000"], "--port must be in 0..65535"),
    (["--prefill", "http://a:1", "--decode", "http://b:2", "--host", "localhost"], "--host must be an IP address"),
    (["--prefill", "http://a:1", "--decode", "http://b:2", "--no-such-flag"], "no-such-flag"),
])
def test_bad_flags(args, needle):
    proc = run_minfer("router", *args, check=False, timeout=10)
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert lines[0].startswith("minfer router: ")


def test_help_and_command_list():
    proc = run_minfer("router", "--help", timeout=10)
    assert "--prefill URL [URL...] --decode URL [URL...]" in proc.stdout and "--policy" in proc.stdout
    assert "router" in run_minfer("--help", timeout=10).stdout


# ---- the router's own answers ---------------------------------------------------------------

def test_nothing_up_bad_bodies_and_metrics_shape():
    p, d = refused_url(), refused_url()
    with Router([p], [d]) as r:
        status, body = r.json("GET", "/health")
        assert status == 503
        assert_openai_error(body, 503)
        status, headers, data = r.request("POST", "/v1/completions", {"prompt": "x"})
        assert status == 503 and headers.get("retry-after") == "1"
        assert_openai_error(json.loads(data), 503)
        assert "no decode instance is up" in json.loads(data)["error"]["message"]
        status, body = r.json("GET", "/v1/models")
        assert status == 503
        # Bad bodies get 400 before any instance is needed.
        for bad in (b"{not json", b"[1, 2]", b'"text"', b""):
            status, body = r.json("POST", "/v1/chat/completions", bad)
            assert status == 400, bad
            assert_openai_error(body, 400)
            assert body["error"]["type"] == "BadRequestError"
        status, body = r.json("GET", "/v1/completions")
        assert status == 405 and body["error"]["code"] == 405
        status, body = r.json("GET", "/v1/embeddings")
        assert status == 404 and body["error"]["code"] == 404

        m = r.samples()
        assert m["minfer:router_requests_total"] == 5  # the 503 and the four 400s
        assert m["minfer:router_failed_requests_total"] == 1
        assert m["minfer:router_retries_total"] == 0
        for role, url in (("prefill", p), ("decode", d)):
            assert m[f'minfer:router_instance_up{{role="{role}",url="{url}"}}'] == 0
            assert m[f'minfer:router_in_flight{{role="{role}",url="{url}"}}'] == 0
        _, headers, _ = r.request("GET", "/metrics")
        assert headers["content-type"].startswith("text/plain")
        assert r.stop() == 0  # SIGTERM: a clean exit


# ---- real instances behind the router ---------------------------------------------------------

PROMPT = "Once upon a time"
# Slow enough on one CPU thread (about 100 tokens/s) to cut a stream or a prefill off in the middle.
SLOW = ["--synthetic", "l134m:q8_0"]


def prefill(*args):
    return Server("--kv-role", "prefill", "--threads", "1", *args)


def decode(*args):
    return Server("--kv-role", "decode", "--kv-transfer-port", "0", "--threads", "1", *args)


def served(instance):
    """Requests an instance has finished."""
    m = instance.metrics()
    return m["minfer:request_success_total"] if "minfer:request_success_total" in m else sum(
        v for k, v in m.items() if k.startswith("minfer:request_success_total"))


def finished(instance):
    _, _, data = instance.request("GET", "/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in data.decode().splitlines()
               if line.startswith("minfer:request_success_total{"))


def assert_clean(*instances):
    """Idle, and no KV block held or parked, no KV staged."""
    for i in instances:
        m = i.wait_idle()
        assert m["minfer:kv_parked_blocks"] == 0 and m["minfer:kv_staged_bytes"] == 0, i.base_url


def offline_greedy(prompt, n):
    out = subprocess.run([minfer_bin(), "run", ROOT / "models" / "stories260K.gguf", "-p", prompt, "-n", str(n),
                          "--temp", "0", "--json", "--device", DEVICE], capture_output=True, text=True, check=True)
    text = json.loads(out.stdout)["text"]
    return text[len(prompt):] if text.startswith(prompt) else text  # `run` prints the prompt too


def test_a_request_through_real_instances_equals_offline_greedy():
    want = offline_greedy(PROMPT, 16)
    with prefill() as p, decode() as d1, decode() as d2, Router([p.base_url], [d1.base_url, d2.base_url]) as r:
        status, body = r.json("GET", "/health")
        assert status == 200 and body["prefill_up"] == 1 and body["decode_up"] == 2
        for _ in range(2):  # round-robin: both decode instances
            assert r.complete(prompt=PROMPT, max_tokens=16, temperature=0)["choices"][0]["text"] == want
        assert finished(d1) == 1 and finished(d2) == 1
        events = r.stream("/v1/completions", {"prompt": PROMPT, "max_tokens": 16, "temperature": 0, "stream": True})
        assert "".join(e["choices"][0]["text"] for e in events[:-1]) == want and events[-1] == "[DONE]"
        # Chat with max_completion_tokens and the client's stream_options, through both instances.
        events = r.stream("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                    "max_completion_tokens": 5, "stream": True, "temperature": 0,
                                                    "stream_options": {"include_usage": True}})
        assert events[-1] == "[DONE]" and events[-2]["usage"]["completion_tokens"] == 5
        status, body = r.json("GET", "/v1/models")
        assert status == 200 and body["data"][0]["id"] == "stories260K"
        # A bad request is the client's: the prefill instance's 400 as it came, no retry.
        status, body = r.json("POST", "/v1/completions", {"prompt": PROMPT, "temperature": -1})
        assert status == 400 and "temperature" in body["error"]["message"]
        m = r.samples()
        assert m["minfer:router_retries_total"] == 0 and m["minfer:router_failed_requests_total"] == 0
        # Each decode instance computed only the last token of each prompt it received.
        assert d1.metrics()["minfer:prefill_computed_tokens_total"] == finished(d1)
        assert_clean(p, d1, d2)


def test_api_key_is_asked_of_clients_and_sent_to_instances():
    with prefill("--api-key", "sesame") as p, decode("--api-key", "sesame") as d, \
            Router([p.base_url], [d.base_url], "--api-key", "sesame") as r:
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"})
        assert status == 401 and body["error"]["type"] == "AuthenticationError"
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"}, headers={"Authorization": "Bearer sesame"})
        assert status == 200, body
        assert r.json("GET", "/health")[0] == 200  # not under /v1: open


def test_a_decode_instance_down_at_start_is_never_picked():
    absent = refused_url()
    with prefill() as p, decode() as d, Router([p.base_url], [absent, d.base_url]) as r:
        assert r.up("decode", absent) == 0 and r.up("decode", d.base_url) == 1
        for _ in range(4):
            r.complete()
        assert finished(d) == 4 and r.samples()["minfer:router_retries_total"] == 0


def test_an_instance_that_receives_no_kv_is_kept_down():
    with prefill() as p, Server() as plain, Router([p.base_url], [plain.base_url]) as r:
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"})
        assert status == 503 and "no decode instance is up" in body["error"]["message"]
        assert finished(p) == 0 and finished(plain) == 0


def test_a_decode_instance_gone_between_health_checks_is_a_kv_transfer_error_then_a_retry():
    # Health checks far apart: the router learns of the dead instance from the prefill's 502.
    with prefill() as p, decode() as d1, decode() as d2, \
            Router([p.base_url], [d1.base_url, d2.base_url], health_interval="60") as r:
        wait_all_up(r, "decode", [d1.base_url, d2.base_url])
        d1.stop()
        for _ in range(4):
            r.complete()
        assert finished(d2) == 4
        assert r.up("decode", d1.base_url) == 0
        assert r.samples()["minfer:router_retries_total"] >= 1
        assert p.metrics()["minfer:kv_transfer_failures_total"] >= 1
        assert_clean(p, d2)


def test_a_prefill_instance_that_is_down_is_taken_out():
    with prefill() as p1, prefill() as p2, decode() as d, \
            Router([p1.base_url, p2.base_url], [d.base_url], health_interval="60") as r:
        wait_all_up(r, "prefill", [p1.base_url, p2.base_url])
        p1.stop()
        for _ in range(3):
            r.complete()
        assert finished(p2) == 3 and r.up("prefill", p1.base_url) == 0
        assert r.samples()["minfer:router_retries_total"] >= 1
        assert_clean(p2, d)


def test_every_decode_instance_gone_is_a_503():
    with prefill() as p, decode() as d, Router([p.base_url], [d.base_url], health_interval="60") as r:
        d.stop()
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"})
        assert status == 503, body
        assert_clean(p)


def test_a_killed_instance_is_taken_out_and_a_restarted_one_comes_back():
    with prefill() as p, decode() as d1, decode() as d2, Router([p.base_url], [d1.base_url, d2.base_url]) as r:
        port = d1.port
        d1.stop()
        wait_for(lambda: r.up("decode", d1.base_url) == 0, what="d1 marked down")
        for _ in range(4):
            r.complete()
        assert finished(d2) == 4
        # The same HTTP port again, a new KV port: the router reads /v1/kv_transfer again.
        cmd = [minfer_bin(), "serve", "--port", str(port), "--device", DEVICE, "--threads", "1", "--kv-role",
               "decode", "--kv-transfer-port", "0"]
        with ListeningProcess(cmd, what="minfer serve") as again:
            wait_for(lambda: r.up("decode", d1.base_url) == 1, what="d1 back up")
            for _ in range(4):
                r.complete()
            assert finished(Client(d1.base_url)) == 2
        assert r.samples()["minfer:router_failed_requests_total"] == 0


def send_raw(r, body):
    data = json.dumps(body).encode()
    sock = socket.create_connection((r.host, r.port), timeout=60)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    return sock


def test_a_decode_instance_killed_mid_stream_ends_the_stream_with_an_error_and_no_duplicates():
    with prefill(*SLOW) as p, decode(*SLOW) as d, Router([p.base_url], [d.base_url]) as r:
        sock = send_raw(r, {"prompt": PROMPT, "max_tokens": 400, "ignore_eos": True, "stream": True})
        got = b""
        while got.count(b"data: {") < 3:
            got += sock.recv(65536)
        d.stop(signal.SIGKILL)
        while not got.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
        sock.close()
        events = [e for e in re.findall(rb"data: (.*?)\n\n", got)]
        assert events[-1] == b"[DONE]"
        error = json.loads(events[-2])
        assert error["error"]["code"] == 502
        texts = [json.loads(e)["choices"][0]["text"] for e in events[:-2]]
        assert 3 <= len(texts) < 400  # what came before the failure, once each
        m = r.samples()
        assert m["minfer:router_failed_requests_total"] == 1 and m["minfer:router_retries_total"] == 0
        assert_clean(p)


def test_a_client_that_leaves_mid_stream_frees_the_request_on_the_decode_instance():
    with prefill(*SLOW) as p, decode(*SLOW) as d, Router([p.base_url], [d.base_url]) as r:
        sock = send_raw(r, {"prompt": PROMPT, "max_tokens": 400, "ignore_eos": True, "stream": True})
        got = b""
        while b"data:" not in got:
            got += sock.recv(4096)
        sock.close()
        assert_clean(p, d)
        assert d.metrics()["minfer:generation_tokens_total"] < 400
        assert r.json("GET", "/health")[0] == 200


def test_a_client_that_leaves_during_the_prefill_frees_the_prompt_everywhere():
    long_prompt = "the little dog ran to the big tree and saw a red ball " * 120  # about 1,500 tokens
    with prefill(*SLOW) as p, decode(*SLOW) as d, Router([p.base_url], [d.base_url]) as r:
        sock = send_raw(r, {"prompt": long_prompt, "max_tokens": 50, "stream": True})
        wait_for(lambda: p.metrics()["minfer:num_requests_running"] == 1, what="the prefill running")
        sock.close()
        assert_clean(p, d)
        assert finished(d) == 0 and d.metrics()["minfer:kv_transfer_received_blocks_total"] == 0


def test_least_loaded_sends_the_next_request_to_the_idle_decode_instance():
    with prefill(*SLOW) as p, decode(*SLOW) as d1, decode(*SLOW) as d2, \
            Router([p.base_url], [d1.base_url, d2.base_url], "--policy", "least-loaded") as r:
        busy = send_raw(r, {"prompt": PROMPT, "max_tokens": 300, "ignore_eos": True, "stream": True})
        got = b""
        while b"data:" not in got:
            got += busy.recv(4096)
        first = d1 if d1.metrics()["minfer:num_requests_running"] == 1 else d2
        other = d2 if first is d1 else d1
        for _ in range(3):
            r.complete(max_tokens=2)
        assert finished(other) == 3 and finished(first) == 0
        busy.close()
        assert_clean(p, d1, d2)
