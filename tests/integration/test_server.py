"""`minfer serve` over real HTTP: the OpenAI client, every error status, streaming,
aborts of streams cut mid-way, the drain on SIGTERM, and a fuzz of malformed requests."""
import concurrent.futures
import json
import shutil
import random
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from minfer_server import DEVICE, ROOT, Server, minfer_bin

MODEL = ROOT / "models" / "stories260K.gguf"
PROMPTS = ["Once upon a time", "Lily went to the park", "The little dog ran", "One day, a"]


@pytest.fixture(scope="module")
def server():
    with Server("--max-num-seqs", 64) as s:
        yield s


def offline_greedy(prompt, n):
    out = subprocess.run([minfer_bin(), "run", MODEL, "-p", prompt, "-n", str(n), "--temp", "0", "--json",
                          "--device", DEVICE], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_openai_client_completions_and_chat_match_minfer_run(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused")
    model = client.models.list().data[0].id
    assert model == "stories260K"
    for prompt in PROMPTS:
        ref = offline_greedy(prompt, 24)
        r = client.completions.create(model=model, prompt=prompt, max_tokens=24, temperature=0)
        want = ref["text"][len(prompt):] if ref["text"].startswith(prompt) else None
        assert r.choices[0].text == want, (r.choices[0].text, ref)
        assert r.usage.prompt_tokens == len(ref["prompt_ids"])
        assert r.usage.completion_tokens == len(ref["generated_ids"])
        # Streaming gives the same text, chunk by chunk, with usage at the end when asked.
        chunks = list(client.completions.create(model=model, prompt=prompt, max_tokens=24, temperature=0, stream=True,
                                                stream_options={"include_usage": True}))
        assert "".join(c.choices[0].text for c in chunks if c.choices) == want
        assert chunks[-1].usage.completion_tokens == len(ref["generated_ids"])
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == r.choices[0].finish_reason
    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Once upon a time"}],
                                          max_tokens=16, temperature=0)
    assert chat.choices[0].message.role == "assistant"
    assert chat.usage.completion_tokens > 0
    streamed = list(client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Once upon a time"}],
                                                   max_tokens=16, temperature=0, stream=True))
    assert streamed[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == chat.choices[0].message.content


def test_completion_parameters(server):
    status, r = server.json("POST", "/v1/completions", {"prompt": ["Once upon a time", "One day"], "max_tokens": 8,
                                                         "temperature": 0, "n": 2, "logprobs": 2, "echo": True})
    assert status == 200, r
    assert [c["index"] for c in r["choices"]] == [0, 1, 2, 3]
    assert r["choices"][0]["text"].startswith("Once upon a time")
    assert r["choices"][0]["text"] == r["choices"][1]["text"]  # greedy: both samples agree
    lp = r["choices"][0]["logprobs"]
    assert lp["token_logprobs"][0] is None and len(lp["tokens"]) == len(lp["top_logprobs"])
    status, r = server.json("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0,
                                                         "stop": ["."], "seed": 1})
    assert status == 200 and "." not in r["choices"][0]["text"] and r["choices"][0]["finish_reason"] == "stop"
    assert r["choices"][0]["stop_reason"] == "."
    # The same seed, the same sample.
    a = server.json("POST", "/v1/completions", {"prompt": "One day", "max_tokens": 12, "temperature": 1, "seed": 7})[1]
    b = server.json("POST", "/v1/completions", {"prompt": "One day", "max_tokens": 12, "temperature": 1, "seed": 7})[1]
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    # ignore_eos, min_tokens, priority, user and an unknown field (ignored, logged).
    status, r = server.json("POST", "/v1/completions", {"prompt": "The end.", "max_tokens": 30, "ignore_eos": True,
                                                         "min_tokens": 30, "priority": 1, "user": "a", "frobnicate": 1})
    assert status == 200 and r["usage"]["completion_tokens"] == 30


def test_tokenize_detokenize_models_health_ready_metrics(server):
    status, r = server.json("POST", "/tokenize", {"prompt": "Once upon a time"})
    assert status == 200 and r["count"] == len(r["tokens"]) and r["max_model_len"] == 512
    assert r["tokens"] == offline_greedy("Once upon a time", 1)["prompt_ids"]
    status, d = server.json("POST", "/detokenize", {"tokens": r["tokens"]})
    assert status == 200 and d["prompt"] == "Once upon a time"
    assert server.json("GET", "/v1/models")[1]["data"][0]["max_model_len"] == 512
    assert server.request("GET", "/health")[0] == 200
    status, r = server.json("GET", "/ready")
    assert status == 200 and r["generated_tokens"] == 1
    # /ready's probe is not a client request: one of those, so that the latency histograms have a count
    # even when this test runs alone.
    assert server.json("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 2})[0] == 200
    server.wait_idle()  # the engine's counters are published after the step that answered
    deadline = time.time() + 30  # and the request's latencies by its connection's thread, after that
    while server.metrics()["minfer:e2e_request_latency_seconds_count"] == 0 and time.time() < deadline:
        time.sleep(0.02)
    m = server.metrics()
    for name in ["num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "prefix_cache_queries",
                 "prefix_cache_hits", "num_preemptions", "prompt_tokens_total", "generation_tokens_total",
                 "time_to_first_token_seconds_count", "inter_token_latency_seconds_count",
                 "e2e_request_latency_seconds_count", "request_queue_time_seconds_count", "engine_steps_total",
                 "device_idle_seconds_total"]:
        assert "minfer:" + name in m, name
    assert m["minfer:e2e_request_latency_seconds_count"] > 0
    assert m["minfer:engine_steps_total"] > 0
    assert m["minfer:device_idle_seconds_total"] >= 0
    # Every series carries the model's name, histograms' buckets, sums and counts included (as vLLM's do).
    series = [line for line in server.request("GET", "/metrics")[2].decode().splitlines() if not line.startswith("#")]
    unlabelled = [line for line in series if 'model_name="' not in line]
    assert series and not unlabelled, unlabelled[:3]


@pytest.mark.parametrize("body, status, says", [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "JSON object"),
    ({"prompt": 5}, 400, "prompt"),
    ({"prompt": "a", "max_tokens": "x"}, 400, "max_tokens"),
    ({"prompt": "a", "temperature": -1}, 400, "temperature"),
    ({"prompt": "a", "top_p": 2}, 400, "top_p"),
    ({"prompt": "a", "n": 0}, 400, "'n' must be in 1.."),  # one message for both ends of the range
    ({"prompt": "a", "n": 100000}, 400, "'n' must be in 1.."),
    ({"prompt": "a", "logprobs": 99}, 400, "logprobs"),
    ({"prompt": "a", "max_tokens": 100000}, 400, "maximum context length"),
    ({"prompt": "a " * 600, "max_tokens": 1}, 400, "maximum context length"),
    ({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer", "multipleOf": 2}}}},
     400, "'response_format.json_schema.schema': at '#': 'multipleOf' is not supported yet"),
    ({"prompt": "a", "response_format": {"type": "xml"}}, 400, "type must be text, json_object or json_schema"),
    ({"prompt": "a", "guided_choice": []}, 400, "'guided_choice' must be a non-empty array of strings"),
    ({"prompt": "a", "guided_choice": ["a", 1]}, 400, "'guided_choice' must be a non-empty array of strings"),
    ({"prompt": "a", "stream": "yes"}, 400, "stream"),
    ({"prompt": "a", "model": "gpt-4"}, 404, "does not exist"),
])
def test_bad_completion_requests(server, body, status, says):
    got, _, data = server.request("POST", "/v1/completions", body)
    assert got == status, data
    err = json.loads(data)["error"]
    assert says in err["message"] and err["code"] == status and err["type"]


def test_bad_chat_requests(server):
    for body, says in [({"messages": []}, "messages"), ({"messages": [{"content": "x"}]}, "role"),
                       ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, "tools[0]"),
                       ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "text")]:
        got, _, data = server.request("POST", "/v1/chat/completions", body)
        assert got == 400 and says in json.loads(data)["error"]["message"], data
    assert server.request("GET", "/v1/completions")[0] == 405
    assert server.request("GET", "/nope")[0] == 404
    assert server.request("POST", "/detokenize", {"tokens": [10 ** 6]})[0] == 400


def test_body_over_the_limit_is_refused_from_its_headers():
    with Server("--max-body-bytes", "1K") as s:
        sock = socket.create_connection((s.host, s.port), timeout=10)
        # Announce 1 GB and send none of it: the 413 must come anyway.
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000000000\r\n\r\n")
        reply = sock.recv(65536).decode(errors="replace")
        assert reply.startswith("HTTP/1.1 413"), reply
        assert "over the limit" in reply
        sock.close()
        assert s.request("POST", "/v1/completions", {"prompt": "x" * 2000})[0] == 413
        assert s.request("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 2})[0] == 200


def test_api_key():
    with Server("--api-key", "sekret") as s:
        assert s.request("GET", "/v1/models")[0] == 401
        assert s.request("GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert s.request("GET", "/v1/models", headers={"Authorization": "Bearer sekret"})[0] == 200
        assert s.request("GET", "/health")[0] == 200  # only /v1 needs the key


def test_full_waiting_queue_is_503_with_retry_after():
    # One sequence runs at a time and one may wait: of 12 long requests sent at once, most find
    # the queue full. (A synthetic model with a 2048-token context, so a request lasts a while.)
    with Server("--max-waiting", 1, "--max-num-seqs", 1, "--synthetic", "tiny") as s:
        results = []
        start = threading.Barrier(12)

        def long_request():
            start.wait()
            results.append(s.request("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 1000,
                                                                  "ignore_eos": True}))
        threads = [threading.Thread(target=long_request) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = sorted(status for status, _, _ in results)
        assert statuses.count(200) >= 1 and statuses.count(503) >= 6, statuses
        for status, headers, data in results:
            if status == 503:
                assert headers.get("retry-after") == "1" and "retry" in json.loads(data)["error"]["message"]
        s.wait_idle()


def finished_requests(server):
    """request_success_total by finish reason."""
    text = server.request("GET", "/metrics")[2].decode()
    return {reason: int(float(n)) for reason, n in
            re.findall(r'request_success_total\{[^}]*finished_reason="(\w+)"\} (\S+)', text)}


def test_streams_cut_midway_are_aborted_and_free_their_blocks(server):
    before = finished_requests(server)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 500, "ignore_eos": True, "stream": True}).encode()
    # Each client leaves right after its request: waiting for the stream to begin
    # first let a loaded test machine fall so far behind that the server, whose
    # writes never block (85 KB of events fit in the socket buffers), finished
    # all 50 x 500 tokens before the first close. Leaving at once, the server
    # finds the client gone at its first or second write, long before token 500.
    for _ in range(25):  # half also read the start of the stream: cut midway
        sock = socket.create_connection((server.host, server.port), timeout=10)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        sock.close()
    for _ in range(25):
        sock = socket.create_connection((server.host, server.port), timeout=10)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.close()
    m = server.wait_idle()
    assert m["minfer:kv_cache_usage_perc"] == 0
    # The engine is idle, but a handler counts its request once it has read the
    # last output, on the I/O thread, which a loaded machine may leave behind:
    # wait until all 50 are counted, whatever their reason.
    deadline = time.time() + 30
    while sum(finished_requests(server).values()) - sum(before.values()) < 50 and time.time() < deadline:
        time.sleep(0.05)
    after = finished_requests(server)
    ended = {reason: after[reason] - before.get(reason, 0) for reason in after}
    assert sum(ended.values()) == 50, ended
    # They ended as aborts, not by running to max_tokens with nobody listening.
    assert ended["abort"] >= 45, ended
    status, r = server.json("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})
    assert status == 200 and r["usage"]["completion_tokens"] == 4


def test_sigterm_finishes_requests_in_flight_then_exits():
    s = Server()
    result = {}

    def long_request():
        result["r"] = s.json("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 300, "ignore_eos": True})

    t = threading.Thread(target=long_request)
    t.start()
    time.sleep(0.3)
    s.proc.send_signal(signal.SIGTERM)
    t.join(timeout=60)
    assert s.proc.wait(timeout=60) == 0
    status, r = result["r"]
    assert status == 200 and r["usage"]["completion_tokens"] == 300


def test_access_log_one_line_a_request():
    with Server("--access-log") as s:
        status, r = s.json("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 5, "ignore_eos": True})
        assert status == 200
        assert s.request("POST", "/v1/completions", {"prompt": "a", "top_p": 7})[0] == 400
        assert s.request("GET", "/health")[0] == 200
    # The log goes to standard output, read once the server has exited.
    lines = [line for line in s.proc.stdout.read().splitlines() if "access:" in line]
    assert len(lines) == 3, lines
    done = next(line for line in lines if f"id={r['id']}" in line)
    assert '"POST /v1/completions" 200' in done and "127.0.0.1" in done
    assert f"prompt_tokens={r['usage']['prompt_tokens']} completion_tokens=5" in done
    assert re.search(r"ttft_ms=[0-9.]+ total_ms=[0-9.]+", done), done
    assert any('"POST /v1/completions" 400' in line for line in lines)
    assert any('"GET /health" 200' in line for line in lines)


def test_idle_and_slow_clients_time_out():
    with Server("--timeout-keep-alive", 1) as s:
        sock = socket.create_connection((s.host, s.port), timeout=10)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(2.5)  # idle past the keep-alive timeout: the server closes
        assert sock.recv(4096) == b""
        sock.close()


def random_request(rng):
    """A malformed or odd request: random bytes, mutated request lines, bad headers, odd bodies."""
    good = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 43\r\n\r\n"
            b'{"prompt": "Once upon", "max_tokens": 2}   ')
    kind = rng.randrange(6)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    if kind == 1:  # flip bytes of a good request
        b = bytearray(good)
        for _ in range(rng.randrange(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if kind == 2:  # truncate it
        return good[:rng.randrange(len(good))]
    if kind == 3:  # odd JSON bodies
        bodies = [b"{}", b"null", b'{"prompt": []}', b'{"prompt": [[1, 2], "x"]}', b'{"prompt": "a", "n": 1e300}',
                  b'{"prompt": "a", "stop": [1]}', b'{"prompt": "a", "logit_bias": {"x": 1}}', b'{"prompt": [-1]}',
                  b'{"messages": [{"role": "user", "content": null}]}', b'{"prompt": "\\ud800"}',
                  json.dumps({"prompt": "a", "max_tokens": rng.randrange(-5, 5)}).encode()]
        body = rng.choice(bodies)
        path = rng.choice([b"/v1/completions", b"/v1/chat/completions", b"/tokenize", b"/detokenize"])
        return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
                + body)
    if kind == 4:  # bad headers
        return rng.choice([b"GET / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", b"POST /v1/completions HTTP/9.9\r\n\r\n",
                           b"GET /health HTTP/1.1\r\n" + b"X: " + b"a" * 70000 + b"\r\n\r\n",
                           b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                           b"\r\n\r\n\r\n", b"GET /health?x=%%% HTTP/1.1\r\nHost: x\r\n\r\n"])
    return b"POST /tokenize HTTP/1.1\r\nContent-Length: 10\r\n\r\n{\"prompt\":"  # a body that never completes


def test_fuzzed_requests_leave_the_server_alive_and_correct():
    with Server("--timeout-keep-alive", 2) as s:
        want = s.json("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0})[1]
        rng = random.Random(1234)
        requests = [random_request(rng) for _ in range(3000)]

        def send(i):
            sock = socket.create_connection((s.host, s.port), timeout=5)
            try:
                sock.sendall(requests[i])
                sock.shutdown(socket.SHUT_WR) if i % 3 else None
                sock.settimeout(0.5 if i % 3 == 0 else 5)
                sock.recv(65536)
            except (socket.timeout, ConnectionError):
                pass
            finally:
                sock.close()

        # Sixteen clients at a time: a third of the requests wait out their half-second
        # timeout, which one client at a time spent 90 s on (and the server's threads
        # see concurrent bad input, which the TSan run is there for).
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(send, range(len(requests))))
        assert s.proc.poll() is None, "the server died"
        got = s.json("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0})[1]
        assert got["choices"][0]["text"] == want["choices"][0]["text"]
        s.wait_idle()


def test_load_through_bench_serve_matches_offline_greedy(tmp_path):
    """500 requests at concurrency 32 through `minfer bench serve`: none fails, every text equals what
    `minfer generate` (offline, the same engine without HTTP) gives, and afterwards the pool is free."""
    rng = random.Random(5)
    words = ["dog", "ball", "park", "happy", "sun", "tree", "cat", "mom", "big", "red", "ran", "saw", "played"]
    prompts = [f"{rng.choice(PROMPTS)} {' '.join(rng.choice(words) for _ in range(rng.randrange(0, 6)))}".strip()
               for _ in range(500)]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps({"prompt": p, "max_tokens": rng.randrange(8, 48)}) + "\n" for p in prompts))
    offline_in = tmp_path / "offline.jsonl"
    offline_in.write_text("".join(json.dumps({**json.loads(line), "temperature": 0}) + "\n"
                                  for line in requests.read_text().splitlines()))
    subprocess.run([minfer_bin(), "generate", MODEL, "--input", offline_in, "--output", tmp_path / "offline_out.jsonl",
                    "--device", DEVICE], check=True, capture_output=True, timeout=600)
    offline = [json.loads(line)["choices"][0]["text"] for line in (tmp_path / "offline_out.jsonl").read_text().splitlines()]
    with Server("--max-num-seqs", 64) as s:
        result = tmp_path / "bench.json"
        proc = subprocess.run([minfer_bin(), "bench", "serve", "--base-url", s.base_url, "--dataset", f"jsonl:{requests}",
                               "--num-prompts", "500", "--max-concurrency", "32", "--disable-progress",
                               "--result-json", result], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        print(proc.stdout)  # the summary table, for the log
        r = json.loads(result.read_text())
        assert r["completed"] == 500 and r["failed"] == 0
        if DEVICE == "cpu":  # the CPU's rows do not depend on their batch
            assert r["generated_texts"] == offline
        else:  # a GPU's kernels do (near-ties in bf16 K/V): report how many differ, require most equal
            differ = sum(a != b for a, b in zip(r["generated_texts"], offline))
            print(f"{differ} of 500 texts differ from offline greedy")
            assert differ <= 50, differ
        m = s.wait_idle()
        assert m["minfer:kv_cache_usage_perc"] == 0 and m["minfer:num_requests_running"] == 0


def test_bench_serve_extra_body_reaches_every_request(tmp_path):
    # --extra-body's fields go into every request: here a choice constraint, which
    # every generated text then obeys, and a temperature over the client's 0.
    with Server() as s:
        out = tmp_path / "r.json"
        extra = {"guided_choice": ["yes", "no", "maybe so"], "temperature": 1.5, "seed": 3}
        proc = subprocess.run([minfer_bin(), "bench", "serve", "--base-url", s.base_url, "--num-prompts", "12",
                               "--random-input-len", "8", "--random-output-len", "16", "--disable-progress",
                               "--extra-body", json.dumps(extra), "--result-json", str(out)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        r = json.loads(out.read_text())
        assert r["completed"] == 12 and r["extra_body"] == extra
        assert set(r["generated_texts"]) <= {"yes", "no", "maybe so"}, r["generated_texts"]
        assert len(set(r["generated_texts"])) > 1  # sampled at temperature 1.5, not greedy


def test_bench_serve_counts_tokens_with_the_served_models_file(tmp_path):
    # /v1/models gives the model's file as its root (as vLLM does); `minfer bench
    # serve` counts tokens with it when it is a GGUF file here, and says so when not.
    served = tmp_path / "served.gguf"
    shutil.copy(MODEL, served)
    for serve_args, known in [([served], True), (["--synthetic", "tiny"], False)]:
        with Server(*serve_args) as s:
            _, listed = s.json("GET", "/v1/models")
            assert listed["data"][0]["root"] == (str(served) if known else "synthetic:tiny")
            out = tmp_path / "r.json"
            proc = subprocess.run([minfer_bin(), "bench", "serve", "--base-url", s.base_url, "--num-prompts", "2",
                                   "--random-input-len", "8", "--random-output-len", "2", "--disable-progress",
                                   "--result-json", str(out)], capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, proc.stderr
            assert ("model file is not known here" in proc.stderr) != known, proc.stderr
            assert json.loads(out.read_text())["model_id"] == ("served" if known else "tiny")
