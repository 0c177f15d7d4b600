"""`minfer router`, the prefill/decode disaggregation proxy: its flags, its own
answers (400, 401, 404, 405, 503, /health, /metrics), and the flow of a
request through a prefill and a decode instance with what goes wrong on the
way: instances down at start, killed and restarted, failing with 4xx, 5xx or
kv_transfer_error, a decode stream that breaks off, a client that leaves.

Most tests run against kv_instance_double.py, stand-ins that speak the
instances' KV-transfer contract in this process (fast, and able to fail on
purpose); the last ones run real `minfer serve` processes."""
import json
import re
import socket
import subprocess
import threading
import time

import pytest

from conftest import run_minfer
from kv_instance_double import KvInstanceDouble
from minfer_server import DEVICE, ROOT, ListeningProcess, Server, minfer_bin

HEALTH_INTERVAL = "0.2"  # seconds: instances come back within a few tenths


class Router(Server):
    def __init__(self, prefill, decode, *args):
        cmd = [minfer_bin(), "router", "--port", "0", "--health-interval", HEALTH_INTERVAL,
               "--prefill", *prefill, "--decode", *decode, *map(str, args)]
        ListeningProcess.__init__(self, cmd, what="minfer router")

    def samples(self):
        """Every sample of /metrics by its full name, labels included."""
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def up(self, role, url):
        return self.samples()[f'minfer:router_instance_up{{role="{role}",url="{url}"}}']

    def complete(self, **extra):
        status, body = self.json("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 3, **extra})
        assert status == 200, body
        return body


def wait_for(condition, timeout=5.0, what="the condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def refused_url():
    """A URL where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def assert_openai_error(body, code):
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["code"] == code and body["error"]["message"]


@pytest.fixture
def doubles():
    made = []

    def make(role, **knobs):
        d = KvInstanceDouble(role, kv_role=knobs.pop("kv_role", None))
        for k, v in knobs.items():
            setattr(d, k, v)
        made.append(d)
        return d

    yield make
    for d in made:
        try:
            d.kill()
        except OSError:
            pass


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


def test_api_key(doubles):
    p, d = doubles("prefill"), doubles("decode")
    with Router([p.url], [d.url], "--api-key", "sesame") as r:
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"})
        assert status == 401 and body["error"]["type"] == "AuthenticationError"
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"}, headers={"Authorization": "Bearer sesame"})
        assert status == 200, body
        assert r.json("GET", "/health")[0] == 200  # not under /v1: open


# ---- the flow --------------------------------------------------------------------------------

def test_prefill_then_decode_bodies_and_passthrough(doubles):
    p, d = doubles("prefill"), doubles("decode")
    with Router([p.url], [d.url]) as r:
        status, body = r.json("GET", "/health")
        assert status == 200 and body["prefill_up"] == 1 and body["decode_up"] == 1
        client = {"prompt": "Once upon a time", "max_tokens": 7, "min_tokens": 3, "n": 2}
        status, body = r.json("POST", "/v1/completions", client)
        assert status == 200 and body["served_by"] == d.port, body

        [(path, pre)] = p.completions()
        assert path == "/v1/completions"
        params = pre.pop("kv_transfer_params")
        assert re.fullmatch(r"[0-9a-f]{32}", params["transfer_id"])
        # The decode instance's address, 0.0.0.0 replaced by the host of its URL.
        assert params == {"do_remote_decode": True, "remote_address": f"tcp://127.0.0.1:{d.port}",
                          "transfer_id": params["transfer_id"]}
        assert pre == {"prompt": "Once upon a time", "max_tokens": 1, "n": 1, "stream": False}
        [(path, dec)] = d.completions()
        assert dec == {**client, "kv_transfer_params": {"transfer_id": params["transfer_id"]}}

        # Chat, streamed: the decode instance's events as they came, the client's own stream_options kept.
        chat = {"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 5, "stream": True,
                "stream_options": {"include_usage": True}}
        events = r.stream("/v1/chat/completions", chat)
        assert [e["choices"][0]["text"] for e in events[:-1]] == ["tok0 ", "tok1 ", "tok2 "]
        assert events[-1] == "[DONE]"
        path, pre = p.completions()[-1]
        assert path == "/v1/chat/completions" and pre["stream"] is False and pre["max_tokens"] == 1
        assert "max_completion_tokens" not in pre and "stream_options" not in pre
        path, dec = d.completions()[-1]
        assert dec["stream_options"] == {"include_usage": True} and dec["max_completion_tokens"] == 5

        status, body = r.json("GET", "/v1/models")
        assert status == 200 and body["data"][0]["port"] == d.port
        m = r.samples()
        assert m["minfer:router_requests_total"] == 2 and m["minfer:router_retries_total"] == 0


def test_decode_instance_down_at_start(doubles):
    p, d = doubles("prefill"), doubles("decode")
    absent = refused_url()
    with Router([p.url], [absent, d.url]) as r:
        assert r.up("decode", absent) == 0 and r.up("decode", d.url) == 1
        for _ in range(4):
            assert r.complete()["served_by"] == d.port
        assert r.samples()["minfer:router_retries_total"] == 0  # never picked: it was known to be down


def test_an_instance_that_cannot_receive_kv_is_kept_down(doubles):
    p, liar = doubles("prefill"), doubles("decode", kv_role="prefill")
    with Router([p.url], [liar.url]) as r:
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"})
        assert status == 503 and "no decode instance is up" in body["error"]["message"]
        assert liar.completions() == [] and p.completions() == []
        wait_for(lambda: any('role "prefill"' in line for line in r.log), what="the reason in the log")


def test_kv_transfer_error_moves_to_another_decode(doubles):
    p, d1, d2 = doubles("prefill"), doubles("decode", refuse_kv=True), doubles("decode")
    with Router([p.url], [d1.url, d2.url]) as r:
        for _ in range(4):
            assert r.complete()["served_by"] == d2.port
        assert d1.completions() == []
        assert r.samples()["minfer:router_retries_total"] >= 1


def test_prefill_failures(doubles):
    p1, p2, d = doubles("prefill", fail_status=500), doubles("prefill"), doubles("decode")
    with Router([p1.url, p2.url], [d.url]) as r:
        for _ in range(3):
            r.complete()
        assert r.samples()["minfer:router_retries_total"] >= 1
        # A 4xx is the request's fault: the client gets it as it came, no retry.
        p1.fail_status, p2.fail_status = 400, 400
        retries = r.samples()["minfer:router_retries_total"]
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"})
        assert status == 400 and body["error"]["message"] == "told to fail with 400"
        assert r.samples()["minfer:router_retries_total"] == retries


def test_decode_failures(doubles):
    p, d1, d2 = doubles("prefill"), doubles("decode", fail_status=503), doubles("decode")
    with Router([p.url], [d1.url, d2.url]) as r:
        for _ in range(3):
            assert r.complete()["served_by"] == d2.port
        d2.fail_status = 422
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"})
        assert status == 422 and body["error"]["message"] == "told to fail with 422"
        # Every decode instance failing: 503, after one attempt on each.
        d2.fail_status = 500
        wait_for(lambda: r.up("decode", d1.url) == 1, what="d1 back up")
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"})
        assert status == 503 and "every decode instance" in body["error"]["message"], body


def test_killed_instance_is_taken_out_then_comes_back(doubles):
    p, d1, d2 = doubles("prefill"), doubles("decode"), doubles("decode")
    with Router([p.url], [d1.url, d2.url]) as r:
        assert {r.complete()["served_by"] for _ in range(4)} == {d1.port, d2.port}
        queries = d1.kv_queries
        d1.kill()
        for _ in range(6):
            assert r.complete(stream=False)["served_by"] == d2.port
        wait_for(lambda: r.up("decode", d1.url) == 0, what="d1 marked down")
        d1.start()  # the same port
        wait_for(lambda: r.up("decode", d1.url) == 1, what="d1 back up")
        assert d1.kv_queries == queries + 1  # its KV address asked again
        assert d1.port in {r.complete()["served_by"] for _ in range(4)}
        assert r.samples()["minfer:router_failed_requests_total"] == 0


def test_decode_dies_mid_stream(doubles):
    p, d1, d2 = doubles("prefill"), doubles("decode", die_after=2), doubles("decode", die_after=2)
    with Router([p.url], [d1.url, d2.url]) as r:
        events = r.stream("/v1/completions", {"prompt": "x", "stream": True})
        # The whole events, then the router's error and [DONE]; no retry (tokens went out).
        assert [e["choices"][0]["text"] for e in events[:2]] == ["tok0 ", "tok1 "]
        assert_openai_error(events[2], 502)
        assert events[3] == "[DONE]" and len(events) == 4
        assert len(p.completions()) == 1
        m = r.samples()
        assert m["minfer:router_failed_requests_total"] == 1 and m["minfer:router_retries_total"] == 0


def test_client_disconnect_mid_stream(doubles):
    p, d = doubles("prefill"), doubles("decode", events=500, event_delay=0.01)
    with Router([p.url], [d.url]) as r:
        body = json.dumps({"prompt": "x", "stream": True}).encode()
        sock = socket.create_connection((r.host, r.port), timeout=10)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        got = b""
        while b"tok0" not in got:
            got += sock.recv(4096)
        sock.close()
        # The decode instance sees its connection close, long before its 5 s of events.
        wait_for(lambda: d.client_gone == 1, timeout=3, what="the decode instance to see the client go")
        wait_for(lambda: r.samples()[f'minfer:router_in_flight{{role="decode",url="{d.url}"}}'] == 0,
                 what="in_flight back to 0")
        assert r.json("GET", "/health")[0] == 200
        d.events, d.event_delay = 3, 0.0
        assert len(r.stream("/v1/completions", {"prompt": "x", "stream": True})) == 4
        assert r.alive()


def test_client_disconnect_during_prefill(doubles):
    p, d = doubles("prefill", prefill_delay=1.0), doubles("decode")
    with Router([p.url], [d.url]) as r:
        in_flight = f'minfer:router_in_flight{{role="prefill",url="{p.url}"}}'
        body = json.dumps({"prompt": "x"}).encode()
        sock = socket.create_connection((r.host, r.port), timeout=10)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_for(lambda: r.samples()[in_flight] == 1, what="the prefill request")
        sock.close()
        # Dropped at once, not when the prefill instance answers a second later; nothing goes to decode.
        wait_for(lambda: r.samples()[in_flight] == 0, timeout=0.5, what="the prefill request dropped")
        time.sleep(1.0)
        assert d.completions() == [] and r.json("GET", "/health")[0] == 200


def test_least_loaded(doubles):
    p, d1, d2 = doubles("prefill"), doubles("decode", events=40, event_delay=0.05), doubles("decode")
    d2.events, d2.event_delay = 40, 0.05
    with Router([p.url], [d1.url, d2.url], "--policy", "least-loaded") as r:
        slow = threading.Thread(target=r.stream, args=("/v1/completions", {"prompt": "x", "stream": True}))
        slow.start()
        wait_for(lambda: len(d1.completions()) + len(d2.completions()) == 1, what="the slow stream")
        busy = d1 if d1.completions() else d2
        idle = d2 if busy is d1 else d1
        for _ in range(3):
            assert r.complete()["served_by"] == idle.port
        slow.join()


# ---- real minfer serve instances ------------------------------------------------------------

def serve_has_kv_roles():
    proc = subprocess.run([minfer_bin(), "serve", "--help"], capture_output=True, text=True, timeout=30)
    return "--kv-role" in proc.stdout


def test_plain_minfer_serve_is_no_decode_instance(doubles):
    """Today's `minfer serve` without a KV role cannot receive KV: kept down, not sent work."""
    p = doubles("prefill")
    with Server() as plain, Router([p.url], [plain.base_url]) as r:
        assert r.up("decode", plain.base_url) == 0
        status, body = r.json("POST", "/v1/completions", {"prompt": "x"})
        assert status == 503 and "no decode instance is up" in body["error"]["message"]
        assert plain.metrics()["minfer:request_success_total"] == 0
        wait_for(lambda: any("cannot receive KV" in line for line in r.log), what="the reason in the log")


needs_kv_roles = pytest.mark.skipif(
    not serve_has_kv_roles(),
    reason="needs minfer serve --kv-role (the instances' side of the KV-transfer contract, not built yet)")


def offline_greedy(prompt, n):
    out = subprocess.run([minfer_bin(), "run", ROOT / "models" / "stories260K.gguf", "-p", prompt, "-n", str(n),
                          "--temp", "0", "--json", "--device", DEVICE], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["text"]


@needs_kv_roles
def test_end_to_end_with_minfer_serve_instances():
    with Server("--kv-role", "prefill") as p, Server("--kv-role", "decode") as d1, \
            Server("--kv-role", "decode") as d2, Router([p.base_url], [d1.base_url, d2.base_url]) as r:
        prompt = "Once upon a time"
        want = offline_greedy(prompt, 16)
        for _ in range(2):  # both decode instances, round-robin
            body = r.complete(prompt=prompt, max_tokens=16, temperature=0)
            assert body["choices"][0]["text"] == want
        events = r.stream("/v1/completions", {"prompt": prompt, "max_tokens": 16, "temperature": 0, "stream": True})
        assert "".join(e["choices"][0]["text"] for e in events[:-1]) == want and events[-1] == "[DONE]"
        status, body = r.json("GET", "/v1/models")
        assert status == 200 and body["data"][0]["id"] == "stories260K"

        # A decode instance killed: taken out, the requests go on.
        d1.stop()
        for _ in range(3):
            assert r.complete(prompt=prompt, max_tokens=16, temperature=0)["choices"][0]["text"] == want

        # A client that leaves mid-stream: the decode instance frees the request's KV.
        body = json.dumps({"prompt": prompt, "max_tokens": 400, "ignore_eos": True, "stream": True}).encode()
        sock = socket.create_connection((r.host, r.port), timeout=30)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        got = b""
        while b"data:" not in got:
            got += sock.recv(4096)
        sock.close()
        d2.wait_idle()
        p.wait_idle()
        assert r.json("GET", "/health")[0] == 200
