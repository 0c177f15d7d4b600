"""Starts a real `minfer book serve` on a free port for a test, and talks HTTP
to it with the standard library. MINFER_BOOK_ROOT names another repository
root to serve (default: the one the binary finds, this checkout)."""
import http.client
import socket
import json
import os
import pathlib

from minfer_server import ListeningProcess, minfer_bin

ROOT = pathlib.Path(__file__).resolve().parents[2]


def book_root():
    return pathlib.Path(os.environ.get("MINFER_BOOK_ROOT", str(ROOT)))


class BookServer(ListeningProcess):
    def __init__(self, *args, root=None):
        cmd = [minfer_bin(), "book", "serve", "--port", "0", "--root", str(root or book_root()), *map(str, args)]
        super().__init__(cmd, what="minfer book serve")

    def request(self, method, path, body=None, headers=None, timeout=30):
        """(status, headers with lower-case names, body bytes)"""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        if isinstance(data, str):
            data = data.encode()
        conn.request(method, path, body=data, headers=headers or {})
        r = conn.getresponse()
        out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        conn.close()
        return out

    def get(self, path):
        return self.request("GET", path)

    def raw(self, data):
        """Sends bytes as they are; returns what comes back before the server closes."""
        with socket.create_connection((self.host, self.port), timeout=10) as s:
            s.sendall(data)
            chunks = []
            while True:
                try:
                    chunk = s.recv(65536)
                except (ConnectionResetError, socket.timeout):
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks)
