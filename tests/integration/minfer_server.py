"""Starts a real `minfer serve` on a free port for a test, and talks HTTP to it
with the standard library (the openai client is used where the test is
about compatibility)."""
import http.client
import json
import os
import pathlib
import re
import signal
import subprocess
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The server's backend: cpu in CI; scripts/gpu.sh runs these tests with cuda.
DEVICE = os.environ.get("MINFER_TEST_DEVICE", "cpu")


def minfer_bin():
    return os.environ.get("MINFER_BIN", str(ROOT / "build" / "minfer"))


class ListeningProcess:
    """A minfer subcommand that prints `listening on http://HOST:PORT` once it
    serves (`minfer serve`, `minfer book serve`), started on a free port."""

    def __init__(self, cmd, env=None, what="minfer"):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline()
        m = re.search(r"listening on http://([\d.]+):(\d+)", line)
        if not m:
            err = self.proc.stderr.read()
            self.proc.kill()
            raise RuntimeError(f"{what} did not start: {line!r} {err}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.base_url = f"http://{self.host}:{self.port}"
        # Drain stderr so the server never blocks on a full pipe; keep it for failures.
        self.log = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Client:
    """HTTP to a minfer server at host:port (one this test started, or one mpirun did)."""

    def __init__(self, base_url):
        m = re.fullmatch(r"http://([\d.]+):(\d+)", base_url)
        self.host, self.port, self.base_url = m.group(1), int(m.group(2)), base_url

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers dict, body bytes)"""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        h = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        conn.close()
        return out

    def json(self, method, path, body=None, **kw):
        status, headers, data = self.request(method, path, body, **kw)
        return status, json.loads(data) if data else None

    def stream(self, path, body, timeout=60):
        """The SSE events' payloads (parsed JSON, or the string '[DONE]')."""
        status, _, data = self.request("POST", path, body, timeout=timeout)
        assert status == 200, data
        events = []
        for block in data.decode().split("\n\n"):
            if not block.strip():
                continue
            assert block.startswith("data: "), block
            payload = block[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
        return events

    def metrics(self):
        _, _, data = self.request("GET", "/metrics")
        values = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name.split("{")[0] if "_bucket" not in name else name] = float(value)
        return values

    def wait_idle(self, timeout=30):
        """Until nothing runs or waits and no KV block is held."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.metrics()
            if (m["minfer:num_requests_running"] == 0 and m["minfer:num_requests_waiting"] == 0
                    and m["minfer:kv_cache_usage_perc"] == 0):
                return m
            time.sleep(0.1)
        raise AssertionError(f"the server did not go idle: {self.metrics()}")


class Server(ListeningProcess, Client):
    def __init__(self, *args, model=None, env=None):
        cmd = [minfer_bin(), "serve", *( [str(model)] if model else [] ), "--port", "0", "--device", DEVICE,
               *map(str, args)]
        ListeningProcess.__init__(self, cmd, env, what="minfer serve")


class Router(ListeningProcess, Client):
    """`minfer router` over the instances' base URLs, health-checking them every
    `health_interval` seconds (instances come back within a few tenths)."""

    def __init__(self, prefill, decode, *args, health_interval="0.2"):
        cmd = [minfer_bin(), "router", "--port", "0", "--health-interval", health_interval,
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
