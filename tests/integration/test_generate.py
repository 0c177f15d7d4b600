"""`minfer generate`: offline batch inference through the engine.

The bundled model's outputs, all reference cases in one batch, equal llama2.c's
(../shared/reference); the JSONL formats; errors name the line at fault; the
trace describes every step.
"""
import json
import re

import pytest

from conftest import MODEL, ROOT, SHARED, run_minfer

CASES = json.loads((SHARED / "reference" / "stories260K" / "run_c_greedy.json").read_text())


def generate(tmp_path, requests, *flags, check=True):
    src, dst = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    src.write_text("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in requests))
    proc = run_minfer("generate", MODEL, "--input", src, "--output", dst, *flags, check=check, timeout=600)
    results = [json.loads(line) for line in dst.read_text().splitlines()] if proc.returncode == 0 else None
    return proc, results


NGRAM = ["--num-speculative-tokens", "4"]
TIGHT = ["--max-num-batched-tokens", "7", "--num-kv-blocks", "40", "--block-size", "8"]


@pytest.mark.parametrize("flags", [[], TIGHT, NGRAM, NGRAM + TIGHT, ["DRAFT"], ["DRAFT"] + TIGHT],
                         ids=["roomy", "chunked-and-tight", "ngram", "ngram-chunked-and-tight", "draft",
                              "draft-chunked-and-tight"])
def test_reference_cases_in_one_batch(tmp_path, flags, draft_model):
    if flags[:1] == ["DRAFT"]:
        flags = ["--speculative-model", draft_model, "--num-speculative-tokens", "3"] + flags[1:]
    # run.c's `steps` counts positions including the prompt; it stops early after sampling BOS.
    requests = [{"id": f"case-{i}", "prompt": c["prompt"], "max_tokens": c["steps"] - len(c["prompt_ids"]) + 1,
                 "temperature": 0} for i, c in enumerate(CASES)]
    proc, results = generate(tmp_path, requests, *flags)
    assert [r["id"] for r in results] == [f"case-{i}" for i in range(len(CASES))]
    for case, r in zip(CASES, results):
        assert r["prompt_token_ids"] == case["prompt_ids"]
        assert r["choices"][0]["token_ids"] == case["generated_ids"]
        assert r["usage"] == {"prompt_tokens": len(case["prompt_ids"]), "completion_tokens": len(case["generated_ids"])}
    assert "requests/s" in proc.stderr and "prefix cache hit rate" in proc.stderr


def test_bfloat16_kv_cache(tmp_path):
    # Half the bytes a token takes: the same --kv-cache-memory holds twice the blocks.
    blocks = {}
    for dtype in ("float32", "bfloat16"):
        proc, _ = generate(tmp_path, [{"prompt": "Once", "max_tokens": 2}], "--kv-cache-memory", "1M",
                           "--kv-cache-dtype", dtype)
        found = re.search(r"(\d+) KV blocks of 16 tokens \((\w+)\)", proc.stderr)
        assert found and found.group(2) == dtype, proc.stderr
        blocks[dtype] = int(found.group(1))
    assert blocks["bfloat16"] == 2 * blocks["float32"]

    # Rounded keys and values change a few greedy continuations of the reference,
    # but the outputs stay independent of batching, chunking and preemption.
    requests = [{"id": f"case-{i}", "prompt": c["prompt"], "max_tokens": c["steps"] - len(c["prompt_ids"]) + 1,
                 "temperature": 0} for i, c in enumerate(CASES)]
    _, roomy = generate(tmp_path, requests, "--kv-cache-dtype", "bfloat16")
    _, tight = generate(tmp_path, requests, "--kv-cache-dtype", "bfloat16", "--max-num-batched-tokens", "7",
                        "--num-kv-blocks", "40", "--block-size", "8")
    alone = [generate(tmp_path, [r], "--kv-cache-dtype", "bfloat16")[1][0] for r in requests[:4]]
    ids = lambda results: [r["choices"][0]["token_ids"] for r in results]
    assert ids(roomy) == ids(tight)
    assert ids(alone) == ids(roomy)[:4]
    same = sum(got == case["generated_ids"] for got, case in zip(ids(roomy), CASES))
    print(f"bfloat16 KV cache: {same} of {len(CASES)} reference cases give llama2.c's tokens")
    assert same >= len(CASES) - 3


def test_result_format_n_logprobs_echo(tmp_path):
    _, results = generate(tmp_path, [
        {"id": 7, "prompt": "The dog", "max_tokens": 5, "temperature": 0, "logprobs": 2, "echo": True},
        {"prompt_token_ids": [1, 365, 474], "max_tokens": 4, "n": 3, "temperature": 0.8, "seed": 3},
        {"id": "s", "prompt": "Once upon a time", "max_tokens": 50, "temperature": 0, "stop": [" girl"]},
    ])
    a, b, c = results
    assert a["id"] == 7 and b["id"] == 1
    choice = a["choices"][0]
    assert choice["text"].startswith("The dog")  # echo
    lp = choice["logprobs"]
    n_prompt = len(a["prompt_token_ids"])
    assert len(lp["tokens"]) == n_prompt + 5 == len(lp["token_logprobs"]) == len(lp["top_logprobs"])
    assert lp["token_logprobs"][0] is None and all(x <= 0 for x in lp["token_logprobs"][1:])
    assert all(len(t) == 2 for t in lp["top_logprobs"][1:])
    assert "".join(lp["tokens"]) == choice["text"]
    # Greedy: each generated token is the first of its top_logprobs, keyed by the same text as in tokens.
    for token, logprob, top in list(zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]))[n_prompt:]:
        assert top[token] == logprob == max(top.values())
    assert [ch["index"] for ch in b["choices"]] == [0, 1, 2]
    assert all(len(ch["token_ids"]) == 4 for ch in b["choices"])
    assert b["usage"]["completion_tokens"] == 12
    assert c["choices"][0]["finish_reason"] == "stop" and c["choices"][0]["stop_reason"] == " girl"
    assert c["choices"][0]["text"] == ", there was a little"


def test_trace_lists_every_step(tmp_path):
    trace = tmp_path / "trace.jsonl"
    requests = [{"prompt": c["prompt"], "max_tokens": 20, "temperature": 0} for c in CASES]
    generate(tmp_path, requests, "--trace", trace, "--max-num-batched-tokens", "16")
    steps = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))
    assert all(s["num_tokens"] == sum(q["tokens"] for q in s["seqs"]) <= 16 for s in steps)
    requests_seen = {q["request"] for s in steps for q in s["seqs"]}
    assert len(requests_seen) == len(CASES)
    kinds = {q["kind"] for s in steps for q in s["seqs"]}
    assert kinds == {"prefill", "decode"}


@pytest.mark.parametrize("line,needle", [
    ("{not json\n", "requests.jsonl:2: not JSON"),
    ("[1, 2]\n", "requests.jsonl:2: each line must be a JSON object"),
    ('{"prompt": "a", "tools": []}\n', "requests.jsonl:2: 'tools' is for chat"),
    ('{"prompt": 5}\n', "'prompt' must be a string"),
    ('{"prompt": "a", "max_tokens": -3}\n', "'max_tokens' must be in"),
    ('{"prompt": "a", "temperature": "hot"}\n', "'temperature' must be a number"),
    ('{"prompt": "a", "max_tokens": 600}\n', "maximum context length is 512"),
    ('{"prompt": "a", "logit_bias": {"x": 1}}\n', "'logit_bias' key 'x'"),
])
def test_bad_requests_name_the_line(tmp_path, line, needle):
    proc, _ = generate(tmp_path, ['{"prompt": "fine", "max_tokens": 2}\n', line], check=False)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_flags(tmp_path):
    src = tmp_path / "r.jsonl"
    src.write_text('{"prompt": "a"}\n')
    for flags, needle in [([], "--input is required"), (["--input", src], "--output is required"),
                          (["--input", src, "--output", "-", "--scheduling-policy", "lottery"], "unknown scheduling"),
                          (["--input", src, "--output", "-", "--kv-cache-memory", "lots"], "--kv-cache-memory"),
                          (["--input", src, "--output", "-", "--max-model-len", "100000"], "exceeds the model's context")]:
        proc = run_minfer("generate", MODEL, *flags, check=False)
        assert proc.returncode == 2, (flags, proc.stderr)
        assert needle in proc.stderr, (flags, proc.stderr)


MIXED64 = ROOT / "tests" / "integration" / "data" / "mixed64"


@pytest.mark.parametrize("flags", [[], ["--max-step-ms", "0"], ["--max-step-ms", "1"],
                                   ["--max-num-batched-tokens", "16", "--num-kv-blocks", "48", "--block-size", "8",
                                    "--scheduling-policy", "priority"]],
                         ids=["paced", "unpaced", "tiny-steps", "chunked-preempting"])
def test_mixed_workload_byte_identical(tmp_path, flags):
    # 64 requests over every path of the step pipeline (sampling, n > 1, logprobs,
    # echo, stops, penalties, bias, min_tokens, priorities, shared prefixes),
    # scheduled four ways (the CPU's step target, which sizes steps by the clock;
    # none; 1 ms, steps of 16 tokens; tiny chunks with preemption): the bytes are
    # the same every time (batch invariance), and those of data/mixed64/expected.jsonl.
    # That file was written by main at 29d8c95, before the step pipeline's redesign,
    # and written again when the CPU attention became tiled (kernels/cpu/attention.cpp:
    # its polynomial e^x moved logprobs in their last digits; no text changed).
    dst = tmp_path / "results.jsonl"
    run_minfer("generate", MODEL, "--input", MIXED64 / "requests.jsonl", "--output", dst, *flags, timeout=600)
    assert dst.read_bytes() == (MIXED64 / "expected.jsonl").read_bytes()


@pytest.mark.parametrize("flags", [NGRAM, ["DRAFT"], ["--num-speculative-tokens", "6", "--prompt-lookup-min", "2",
                                           "--max-num-batched-tokens", "16", "--num-kv-blocks", "48", "--block-size",
                                           "8", "--scheduling-policy", "priority"]],
                         ids=["ngram", "draft", "ngram-chunked-preempting"])
def test_mixed_workload_byte_identical_with_speculation(tmp_path, flags, draft_model):
    # The same 64 requests with n-gram speculation: every greedy request gives
    # exactly its bytes without (tokens, text, logprobs, stops); sampled ones
    # draw from the same distribution through other random numbers, so their
    # bytes differ (test_spec's chi-square tests compare their distributions).
    if flags == ["DRAFT"]:
        flags = ["--speculative-model", draft_model, "--num-speculative-tokens", "4"]
    dst = tmp_path / "results.jsonl"
    proc = run_minfer("generate", MODEL, "--input", MIXED64 / "requests.jsonl", "--output", dst, *flags, timeout=600)
    requests = [json.loads(line) for line in (MIXED64 / "requests.jsonl").read_text().splitlines()]
    expected = (MIXED64 / "expected.jsonl").read_text().splitlines()
    got = dst.read_text().splitlines()
    greedy = [i for i, r in enumerate(requests) if r.get("temperature", 1) == 0]
    assert len(greedy) >= 20
    for i in greedy:
        assert got[i] == expected[i], requests[i]
    assert re.search(r"speculative decoding \((ngram|draft), k=\d\): [1-9]\d* drafts", proc.stderr), proc.stderr


def test_mixed_workload_on_a_moe_model(tmp_path):
    # The first 32 of those requests on a mixture-of-experts model (the tiny
    # qwen3moe preset, built in memory): roomy, and in tiny chunks that preempt
    # and hit the prefix cache, the bytes are the same (the experts' combine is
    # batch-invariant).
    src = tmp_path / "requests.jsonl"
    src.write_text("".join((MIXED64 / "requests.jsonl").read_text().splitlines(keepends=True)[:32]))
    outputs = []
    for flags in [[], ["--max-num-batched-tokens", "16", "--num-kv-blocks", "40", "--block-size", "8",
                       "--scheduling-policy", "priority"]]:
        dst = tmp_path / f"results{len(outputs)}.jsonl"
        proc = run_minfer("generate", "--synthetic", "qwen3moe-tiny:q8_0", "--input", src, "--output", dst,
                          "--max-step-ms", "0", *flags, timeout=600)
        outputs.append(dst.read_bytes())
    assert re.search(r"[1-9]\d* preemptions", proc.stderr), proc.stderr
    assert outputs[0] == outputs[1]
    assert len(outputs[0].splitlines()) == 32
