"""A stand-in for a `minfer serve` prefill or decode instance that speaks the
router's KV-transfer contract (server/README.md, "server/router/"), in this
process, so the router's own logic (retries, take-outs, streams that break
off, clients that leave) can be tested fast and on purpose.

The KV transfer is acted out over HTTP: a decode double says its KV address
is tcp://0.0.0.0:ITS_PORT; the prefill double, given that address (with the
router's host substituted), POSTs the transfer id to /_kv there, or answers
502 kv_transfer_error when it cannot. A decode double refuses (400) a
request whose transfer id it never received: a router that skipped the
prefill, or sent the wrong id or address, fails the test."""
import http.client
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a peer that hung up (the router dropping a request): expected here, not worth a traceback


class KvInstanceDouble:
    def __init__(self, role, kv_role=None):
        self.role = role
        self.kv_role = kv_role or role  # what /v1/kv_transfer claims (a misconfigured one lies)
        self.requests = []               # (path, body) of every completion request
        self.received_kv = set()         # decode: transfer ids delivered here
        self.client_gone = 0             # streams whose reader went away
        self.kv_queries = 0              # GET /v1/kv_transfer answered
        # What it does with a completion request:
        self.fail_status = None  # answer this status (an OpenAI error body) instead
        self.kv_error = False    # prefill: 502 kv_transfer_error
        self.refuse_kv = False   # decode: KV sent here is refused (so the prefill answers kv_transfer_error)
        self.prefill_delay = 0.0 # prefill: seconds before it answers
        self.events = 3          # decode: SSE events before [DONE]
        self.event_delay = 0.0   # seconds between events
        self.die_after = None    # decode: drop the connection after this many events
        self.port = 0
        self._lock = threading.Lock()
        self._conns = set()
        self._httpd = None
        self.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        double = self

        class Handler(_Handler):
            instance = double

        self._httpd = _Server(("127.0.0.1", self.port), Handler)
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def kill(self):
        """As if the process died: the port closes and every open connection drops."""
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def completions(self):
        with self._lock:
            return list(self.requests)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the router's client expects
    instance: KvInstanceDouble = None

    def setup(self):
        super().setup()
        with self.instance._lock:
            self.instance._conns.add(self.connection)

    def finish(self):
        with self.instance._lock:
            self.instance._conns.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, *args):
        pass

    def _send(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status, message, type_="BadRequestError"):
        self._send(status, {"error": {"message": message, "type": type_, "param": None, "code": status}})

    def do_GET(self):
        inst = self.instance
        if self.path == "/health":
            self._send(200, b"", "text/plain")
        elif self.path == "/v1/kv_transfer":
            with inst._lock:
                inst.kv_queries += 1
            address = f"tcp://0.0.0.0:{inst.port}" if inst.kv_role == "decode" else None
            self._send(200, {"role": inst.kv_role, "address": address, "block_size": 16})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "double", "object": "model", "port": inst.port}]})
        else:
            self._error(404, f"no route {self.path}", "NotFoundError")

    def do_POST(self):
        inst = self.instance
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/_kv":
            if inst.refuse_kv:
                return self._error(500, "refusing KV", "InternalServerError")
            with inst._lock:
                inst.received_kv.add(body["transfer_id"])
            return self._send(200, {})
        with inst._lock:
            inst.requests.append((self.path, body))
        if inst.fail_status:
            return self._error(inst.fail_status, f"told to fail with {inst.fail_status}",
                               "InternalServerError" if inst.fail_status >= 500 else "BadRequestError")
        params = body.get("kv_transfer_params") or {}
        if inst.role == "prefill":
            return self._prefill(params)
        if params.get("transfer_id") not in inst.received_kv:
            return self._error(400, f"no KV arrived for transfer {params.get('transfer_id')!r}")
        if body.get("stream"):
            return self._stream()
        self._send(200, {"object": "text_completion", "served_by": inst.port,
                         "choices": [{"index": 0, "text": "tok0 tok1 tok2", "finish_reason": "length"}]})

    def _prefill(self, params):
        inst = self.instance
        time.sleep(inst.prefill_delay)
        if inst.kv_error or not params.get("do_remote_decode"):
            return self._error(502, "could not deliver the KV", "kv_transfer_error")
        host, port = params["remote_address"].removeprefix("tcp://").rsplit(":", 1)
        try:
            conn = http.client.HTTPConnection(host, int(port), timeout=5)
            conn.request("POST", "/_kv", json.dumps({"transfer_id": params["transfer_id"]}),
                         {"Content-Type": "application/json"})
            delivered = conn.getresponse().status == 200
            conn.close()
        except OSError:
            delivered = False
        if not delivered:
            return self._error(502, f"could not deliver the KV to {params['remote_address']}", "kv_transfer_error")
        self._send(200, {"object": "text_completion", "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
                         "kv_transfer_params": {"transfer_id": params["transfer_id"], "blocks": 1}})

    def _stream(self):
        inst = self.instance
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        try:
            for i in range(inst.events):
                if inst.die_after is not None and i == inst.die_after:
                    # Half an event, then the connection drops: a crash mid-write.
                    chunk(b'data: {"choices": [{"te')
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                event = {"served_by": inst.port, "choices": [{"index": 0, "text": f"tok{i} "}]}
                chunk(f"data: {json.dumps(event)}\n\n".encode())
                time.sleep(inst.event_delay)
            chunk(b"data: [DONE]\n\n")
            chunk(b"")
        except OSError:
            with inst._lock:
                inst.client_gone += 1
            self.close_connection = True
