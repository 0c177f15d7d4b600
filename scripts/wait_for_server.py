#!/usr/bin/env python3
"""Waits until `minfer serve` answers /health on PORT, failing if process PID
exits first or 10 minutes pass (loading a 16 GB model takes a while).

usage: wait_for_server.py PORT PID"""
import os
import sys
import time
import urllib.request

port, pid = sys.argv[1], int(sys.argv[2])
name = os.path.basename(sys.argv[0])
for _ in range(1200):
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(f"{name}: the server exited before it was ready")
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
        sys.exit(0)
    except OSError:
        time.sleep(0.5)
sys.exit(f"{name}: the server did not become ready in 10 minutes")
