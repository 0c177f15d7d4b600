"""Tensor parallelism through the CLI under mpirun on the CPU: `generate`,
`run` and `serve` split over 2 and 4 ranks give what one process gives, bad
launches end every rank with one error, and a server over two ranks answers
the openai client, outlives a client that leaves, and ends every rank on
SIGTERM to rank 0. (tests/dist/tp_equality.cpp checks the logits themselves.)"""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

import pytest

from minfer_server import ROOT, ListeningProcess, minfer_bin

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="no mpirun (scripts/setup.sh installs Open MPI)")
# Open MPI refuses root (CI's containers) without these; more ranks than cores need oversubscribe.
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def mpirun(ranks, *args, timeout=120):
    return subprocess.run([MPIRUN, "-np", str(ranks), minfer_bin(), *map(str, args)], env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def minfer(*args, timeout=120):
    return subprocess.run([minfer_bin(), *map(str, args)], env=ENV, capture_output=True, text=True, timeout=timeout)


def mixed_requests(path):
    """64 requests: greedy and seeded sampling, several lengths, n > 1, logprobs, stops."""
    words = ["Once upon a time", "The little dog", "Lily wanted", "One day, a bird", "Tom and Sue", "The sun"]
    with open(path, "w") as f:
        for i in range(64):
            r = {"id": i, "prompt": words[i % len(words)] + " " * (i % 3), "max_tokens": 8 + (i * 7) % 40}
            if i % 4 == 0:
                r.update(temperature=0.8, seed=i, top_p=0.9)
            else:
                r.update(temperature=0)
            if i % 5 == 0:
                r["logprobs"] = 3
            if i % 9 == 0:
                r.update(n=2, temperature=0.7, seed=100 + i)
            if i % 11 == 0:
                r["stop"] = ["."]
            f.write(json.dumps(r) + "\n")


def results(path):
    return [json.loads(line) for line in open(path)]


@pytest.mark.parametrize("ranks", [2, 4])
def test_generate_split_over_ranks_equals_one_process(tmp_path, ranks):
    mixed_requests(tmp_path / "in.jsonl")
    one = minfer("generate", "--input", tmp_path / "in.jsonl", "--output", tmp_path / "one.jsonl")
    assert one.returncode == 0, one.stderr
    split = mpirun(ranks, "generate", "--input", tmp_path / "in.jsonl", "--output", tmp_path / "tp.jsonl", "-tp", ranks)
    assert split.returncode == 0, split.stderr
    a, b = results(tmp_path / "one.jsonl"), results(tmp_path / "tp.jsonl")
    assert len(a) == len(b) == 64
    for x, y in zip(a, b):
        for cx, cy in zip(x["choices"], y["choices"], strict=True):
            assert cx["token_ids"] == cy["token_ids"], (x["id"], cx["text"], cy["text"])
            assert cx["finish_reason"] == cy["finish_reason"]
            if cx.get("logprobs"):
                for p, q in zip(cx["logprobs"]["token_logprobs"], cy["logprobs"]["token_logprobs"], strict=True):
                    assert abs(p - q) <= 1e-5 * max(1.0, abs(p)), (x["id"], p, q)


@pytest.mark.parametrize("ranks", [2, 4])
def test_generate_expert_parallel_equals_one_process(tmp_path, ranks):
    """qwen3moe-tiny's 8 experts split by id over the ranks (attention tensor-parallel)."""
    mixed_requests(tmp_path / "in.jsonl")
    model = ["--synthetic", "qwen3moe-tiny:f32"]
    io = ["--input", tmp_path / "in.jsonl"]
    one = minfer("generate", *model, *io, "--output", tmp_path / "one.jsonl")
    assert one.returncode == 0, one.stderr
    split = mpirun(ranks, "generate", *model, *io, "--output", tmp_path / "ep.jsonl", "-tp", ranks,
                   "--enable-expert-parallel")
    assert split.returncode == 0, split.stderr
    assert "expert parallel: (row, expert) pairs by rank" in split.stderr, split.stderr
    a, b = results(tmp_path / "one.jsonl"), results(tmp_path / "ep.jsonl")
    assert len(a) == len(b) == 64
    for x, y in zip(a, b):
        for cx, cy in zip(x["choices"], y["choices"], strict=True):
            assert cx["token_ids"] == cy["token_ids"], (x["id"], cx["text"], cy["text"])
    # Without the flag a MoE model does not split: one error, every rank ends.
    tp_only = mpirun(2, "generate", *model, *io, "--output", tmp_path / "tp.jsonl", "-tp", 2)
    assert tp_only.returncode != 0
    assert tp_only.stderr.count("pass --enable-expert-parallel") == 1, tp_only.stderr


@pytest.mark.parametrize("proposer", [["--num-speculative-tokens", "3"],
                                      ["--speculative-model", str(ROOT / "models" / "stories260K.gguf"), "--num-speculative-tokens", "3"]],
                         ids=["ngram", "draft"])
def test_speculation_split_over_two_ranks_keeps_greedy_output(tmp_path, proposer):
    """The target split over 2 ranks (a draft model stays whole on rank 0): greedy output as one
    process without speculation."""
    with open(tmp_path / "in.jsonl", "w") as f:
        for i, p in enumerate(["Once upon a time", "The little dog", "Lily wanted", "One day, a bird"] * 4):
            f.write(json.dumps({"id": i, "prompt": p, "max_tokens": 48, "temperature": 0}) + "\n")
    io = ["--input", tmp_path / "in.jsonl"]
    one = minfer("generate", *io, "--output", tmp_path / "one.jsonl")
    split = mpirun(2, "generate", *io, "--output", tmp_path / "spec.jsonl", "-tp", 2, *proposer)
    assert one.returncode == 0 and split.returncode == 0, split.stderr
    assert "speculative decoding" in split.stderr and " 0 accepted" not in split.stderr, split.stderr
    a, b = results(tmp_path / "one.jsonl"), results(tmp_path / "spec.jsonl")
    assert [x["choices"][0]["token_ids"] for x in a] == [x["choices"][0]["token_ids"] for x in b]


def test_bench_latency_over_two_ranks():
    out = mpirun(2, "bench", "latency", "--synthetic", "tiny:f32", "-tp", 2, "--json", "--repetitions", 1,
                 "--input-len", 16, "--output-len", 8)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])  # rank 0 alone prints
    assert r["tensor_parallel_size"] == 2 and r["decode_tok_s"] > 0 and r["prefill_tok_s"] > 0, r
    assert len(out.stdout.strip().splitlines()) == 1, out.stdout


def test_bench_collectives():
    out = mpirun(3, "bench", "collectives", "--min-bytes", 4096, "--max-bytes", 65536, "--repetitions", 2, "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["op"] for r in rows] == ["all-reduce", "all-gather", "all-to-all"] * 3, rows
    for r in rows:
        assert r["ranks"] == 3 and r["transport"] == "mpi" and r["seconds"] > 0, r
        share = 4 / 3 if r["op"] == "all-reduce" else 2 / 3  # nccl-tests' busbw factors at n = 3
        assert abs(r["busbw_gb_s"] - r["algbw_gb_s"] * share) <= 1e-9 * r["algbw_gb_s"], r
    alone = minfer("bench", "collectives")
    assert alone.returncode == 2 and "mpirun -np N" in alone.stderr


# An rsh agent for Open MPI that "logs in" to any host name by running the command on this machine.
# Each "host" gets its own temporary directory: the daemons of two hosts keep their session
# directories (and the hwloc topology they write there) under the same host name, and sharing one
# made them race on mkdir and crash writing the topology.
FAKE_SSH = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
TMPDIR="$TMPDIR/$1"; export TMPDIR; mkdir -p "$TMPDIR"
shift
exec /bin/sh -c "$*"
"""


def test_generate_over_two_hosts_on_loopback(tmp_path):
    """Two MPI "hosts" (a host file naming two nodes, an agent that starts each rank here): each
    rank is alone on its node (local rank 0 of 1) and the ranks talk over TCP on loopback, as two
    machines would over their network."""
    agent = tmp_path / "fake-ssh"
    agent.write_text(FAKE_SSH)
    agent.chmod(0o755)
    (tmp_path / "hosts").write_text("nodeA slots=1\nnodeB slots=1\n")
    mixed_requests(tmp_path / "in.jsonl")
    io = ["--input", tmp_path / "in.jsonl"]
    one = minfer("generate", *io, "--output", tmp_path / "one.jsonl")
    assert one.returncode == 0, one.stderr
    # Session directories of its own (another job's would be beside them), one per "node" (FAKE_SSH).
    (tmp_path / "ompi").mkdir()
    env = {**ENV, "TMPDIR": str(tmp_path / "ompi")}
    hosts = [MPIRUN, "-np", "2", "--hostfile", str(tmp_path / "hosts"), "--mca", "plm_rsh_agent", str(agent),
             "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
    where = subprocess.run([*hosts, "sh", "-c", "echo $OMPI_COMM_WORLD_LOCAL_SIZE"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert where.stdout.split() == ["1", "1"], where.stdout + where.stderr  # one rank a node
    split = subprocess.run([*hosts, minfer_bin(), "generate", *map(str, io), "--output", str(tmp_path / "tp.jsonl"),
                            "-tp", "2"], env=env, capture_output=True, text=True, timeout=120)
    assert split.returncode == 0, split.stderr
    a, b = results(tmp_path / "one.jsonl"), results(tmp_path / "tp.jsonl")
    assert [c["token_ids"] for x in a for c in x["choices"]] == [c["token_ids"] for x in b for c in x["choices"]]


def test_run_split_over_two_ranks_prints_the_same_text():
    args = ["run", "-p", "Once upon a time", "-n", "40", "--temp", "0"]
    one, split = minfer(*args), mpirun(2, *args, "-tp", 2)
    assert one.returncode == 0 and split.returncode == 0, split.stderr
    assert split.stdout == one.stdout and len(one.stdout) > 60


def test_bad_launches_end_every_rank_with_one_error(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"prompt": "Hi", "max_tokens": 2}\n')
    io = ["--input", tmp_path / "in.jsonl", "--output", tmp_path / "out.jsonl"]
    alone = minfer("generate", *io, "-tp", 2)  # no mpirun
    assert alone.returncode == 2 and "mpirun -np 2" in alone.stderr
    assert minfer("generate", *io, "-tp", 0).returncode == 2
    mismatch = mpirun(2, "generate", *io, "-tp", 4)
    assert mismatch.returncode != 0
    assert mismatch.stderr.count("mpirun started 2 rank(s) but -tp is 4") == 1, mismatch.stderr
    # A flag no command has: every rank meets it, rank 0 says so.
    flag = mpirun(2, "generate", *io, "-tp", 2, "--no-such-flag")
    assert flag.returncode != 0 and flag.stderr.count("no-such-flag") == 1, flag.stderr
    # 3 ranks cannot split the bundled model's 8 heads: every rank stops, one says why.
    heads = mpirun(3, "generate", *io, "-tp", 3)
    assert heads.returncode != 0
    assert heads.stderr.count("the 8 attention heads do not divide among the ranks") == 1, heads.stderr
    # A model no rank can load: every rank stops, one says why.
    missing = mpirun(2, "generate", tmp_path / "missing.gguf", *io, "-tp", 2)
    assert missing.returncode != 0 and missing.stderr.count("missing.gguf") == 1, missing.stderr
    # Every rank's KV pool too small for one sequence: one error.
    kv = mpirun(2, "generate", *io, "-tp", 2, "--kv-cache-memory", 1000)
    assert kv.returncode != 0 and kv.stderr.count("cannot hold one sequence") == 1, kv.stderr


def rank_pids(parent):
    """The ranks mpirun started, by rank (Open MPI puts OMPI_COMM_WORLD_RANK in their environment)."""
    pids = {}
    for child in pathlib.Path(f"/proc/{parent}/task/{parent}/children").read_text().split():
        env = pathlib.Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        for kv in env:
            if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                pids[int(kv.split(b"=")[1])] = int(child)
    return pids


def test_serve_with_expert_parallelism_reports_the_balance():
    """/metrics of a MoE model served over 2 ranks: the ranks, the all-reduced floats, each rank's pairs."""
    server = ListeningProcess([MPIRUN, "-np", "2", minfer_bin(), "serve", "--port", "0", "--synthetic",
                               "qwen3moe-tiny:f32", "-tp", "2", "--enable-expert-parallel"], env=ENV,
                              what="mpirun minfer serve -tp 2 --enable-expert-parallel")
    try:
        import urllib.request
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}).encode()
        request = urllib.request.Request(server.base_url + "/v1/completions", body, {"Content-Type": "application/json"})
        assert json.loads(urllib.request.urlopen(request, timeout=60).read())["choices"][0]["text"]
        metrics = urllib.request.urlopen(server.base_url + "/metrics", timeout=10).read().decode()
        value = lambda prefix: float(next(l for l in metrics.splitlines() if l.startswith(prefix)).rsplit(" ", 1)[1])
        assert value("minfer:tensor_parallel_size{") == 2
        assert value("minfer:all_reduced_floats_total{") > 0
        pairs = [value(f'minfer:expert_pairs_total{{model_name="qwen3moe-tiny:f32",rank="{r}"}}') for r in (0, 1)]
        # 2 layers x 2 experts a token, every prompt and generated token (the last is never fed back).
        assert sum(pairs) > 0 and sum(pairs) % 4 == 0, pairs
        assert value("minfer:expert_imbalance_mean{") >= 1.0
    finally:
        server.stop(signal.SIGTERM)


def test_serve_over_two_ranks_answers_outlives_a_client_and_ends_on_sigterm():
    openai = pytest.importorskip("openai")
    server = ListeningProcess([MPIRUN, "-np", "2", minfer_bin(), "serve", "--port", "0", "--device", "cpu",
                               "-tp", "2"], env=ENV, what="mpirun minfer serve -tp 2")
    try:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused")
        got = client.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=24, temperature=0)
        want = minfer("run", "-p", "Once upon a time", "-n", "24", "--temp", "0", "--json")
        assert got.choices[0].text == json.loads(want.stdout)["text"][len("Once upon a time"):]
        # A client leaves mid-stream: the server aborts its request and goes on.
        body = json.dumps({"prompt": "Once", "max_tokens": 400, "ignore_eos": True, "stream": True}).encode()
        sock = socket.create_connection((server.host, server.port), timeout=10)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.close()
        again = client.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=24,
                                          temperature=0)
        assert again.choices[0].text == got.choices[0].text
        # SIGTERM to rank 0 alone: it drains, releases rank 1, and every rank exits cleanly.
        ranks = rank_pids(server.proc.pid)
        assert sorted(ranks) == [0, 1], ranks
        os.kill(ranks[0], signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0, "".join(server.log)
        for pid in ranks.values():
            assert not pathlib.Path(f"/proc/{pid}").exists() or \
                "zombie" in pathlib.Path(f"/proc/{pid}/status").read_text()
    finally:
        server.stop(signal.SIGKILL)
