"""`minfer serve` with n-gram speculative decoding: greedy answers equal a server
without it (completions and chat, streamed or not, n > 1, logprobs, stop
strings, a JSON schema), the counters on /metrics, and `minfer bench serve`'s
speculative-decoding section read from them."""
import json
import re

import pytest

from minfer_server import Server
from test_bench_serve import check_result, run_bench

REPETITIVE = ["Lily and Tom went to the park. Lily and Tom went to the park. Lily and Tom",
              "The cat sat on the mat. The dog sat on the mat. The cat sat on the",
              "Once upon a time, there was a girl. Once upon a time, there was a"]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["name", "age"]}


@pytest.fixture(scope="module")
def plain_server():
    with Server("--max-num-seqs", 16) as s:
        yield s


@pytest.fixture(scope="module", params=["ngram", "draft"])
def servers(request, plain_server, draft_model):
    flags = (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3}']
             if request.param == "ngram" else ["--speculative-model", draft_model, "--num-speculative-tokens", "3"])
    with Server("--max-num-seqs", 16, *flags) as spec:
        yield plain_server, spec


def bodies():
    for prompt in REPETITIVE:
        yield "/v1/completions", {"prompt": prompt, "max_tokens": 40, "temperature": 0}
        yield "/v1/completions", {"prompt": prompt, "max_tokens": 30, "temperature": 0, "n": 2, "logprobs": 3,
                                  "stop": [" park", "mat."]}
        yield "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}], "max_tokens": 30,
                                       "temperature": 0}
    yield "/v1/chat/completions", {"messages": [{"role": "user", "content": REPETITIVE[0]}], "max_tokens": 60,
                                   "temperature": 0,
                                   "response_format": {"type": "json_schema",
                                                       "json_schema": {"name": "p", "schema": SCHEMA}}}


def strip_ids(r):
    return {k: v for k, v in r.items() if k not in ("id", "created")}


def test_greedy_answers_equal_a_server_without_speculation(servers):
    plain, spec = servers
    before = spec.metrics()
    for path, body in bodies():
        a_status, a = plain.json("POST", path, body)
        b_status, b = spec.json("POST", path, body)
        assert a_status == b_status == 200, (a, b)
        assert strip_ids(a) == strip_ids(b), body
        # Streamed, the text is the same too (drafts accepted several at a time arrive together).
        events = spec.stream(path, {**body, "stream": True})
        assert events[-1] == "[DONE]"
        for choice in a["choices"]:
            i = choice["index"]
            pieces = [c["choices"][0] for c in events[:-1] if c["choices"] and c["choices"][0]["index"] == i]
            text = "".join(p.get("text") or (p.get("delta") or {}).get("content") or "" for p in pieces)
            assert text == (choice.get("text") or choice.get("message", {}).get("content")), body
    after = spec.wait_idle()
    drafts = after["minfer:spec_decode_num_drafts_total"] - before["minfer:spec_decode_num_drafts_total"]
    accepted = (after["minfer:spec_decode_num_accepted_tokens_total"]
                - before["minfer:spec_decode_num_accepted_tokens_total"])
    draft_tokens = (after["minfer:spec_decode_num_draft_tokens_total"]
                    - before["minfer:spec_decode_num_draft_tokens_total"])
    assert drafts > 0 and 0 < accepted <= draft_tokens <= 5 * drafts
    assert plain.metrics()["minfer:spec_decode_num_drafts_total"] == 0
    # The JSON schema's answer is valid JSON of the schema's shape.
    status, r = spec.json("POST", "/v1/chat/completions", list(bodies())[-1][1])
    content = json.loads(r["choices"][0]["message"]["content"]) if r["choices"][0]["finish_reason"] == "stop" else None
    assert content is None or set(content) == {"name", "age"}


def test_per_position_counter_and_bench_serve_section(servers, tmp_path):
    _, spec = servers
    _, _, data = spec.request("GET", "/metrics")
    text = data.decode()
    assert "# TYPE minfer:spec_decode_num_accepted_tokens_per_pos_total counter" in text
    positions = re.findall(r'minfer:spec_decode_num_accepted_tokens_per_pos_total\{[^}]*position="(\d+)"\} (\S+)', text)
    assert positions, text
    counts = [float(v) for _, v in sorted(positions, key=lambda p: int(p[0]))]
    assert counts == sorted(counts, reverse=True)  # a draft is accepted only after the ones before it

    lines = tmp_path / "prompts.jsonl"
    lines.write_text("".join(json.dumps({"prompt": p, "max_tokens": 24}) + "\n" for p in REPETITIVE * 4))
    result = tmp_path / "r.json"
    proc, r = run_bench(spec.base_url, "--dataset", f"jsonl:{lines}", "--num-prompts", 12, "--ignore-eos",
                        result_path=result)
    assert proc.returncode == 0, proc.stderr
    check_result(r, 12)
    assert "Speculative Decoding" in proc.stdout and "Acceptance rate (%):" in proc.stdout, proc.stdout
    assert r["spec_decode_num_drafts"] > 0
    assert 0 < r["spec_decode_acceptance_rate"] <= 100
    assert r["spec_decode_acceptance_length"] == pytest.approx(
        1 + r["spec_decode_accepted_tokens"] / r["spec_decode_num_drafts"])
    per_pos = r["spec_decode_per_position_acceptance_rate"]
    assert sum(per_pos) == pytest.approx(r["spec_decode_accepted_tokens"] / r["spec_decode_num_drafts"])


def test_bad_speculative_flags_are_one_clear_error(tmp_path):
    from conftest import run_minfer
    other = tmp_path / "tiny.gguf"
    run_minfer("synth", "--preset", "tiny", "-o", other)
    for flags, needle in [(["--speculative-config", "{nope"], "JSON object"),
                          (["--speculative-config", '{"method": "ngram"}'], "--num-speculative-tokens"),
                          (["--speculative-method", "medusa", "--num-speculative-tokens", "2"], "medusa"),
                          (["--speculative-method", "ngram"], "--num-speculative-tokens"),
                          (["--num-speculative-tokens", "99"], "1..16"),
                          (["--num-speculative-tokens", "2", "--prompt-lookup-min", "3", "--prompt-lookup-max", "2"],
                           "--prompt-lookup-min"),
                          (["--speculative-method", "draft", "--num-speculative-tokens", "2"], "--speculative-model"),
                          (["--speculative-model", tmp_path / "absent.gguf", "--num-speculative-tokens", "2"],
                           "absent.gguf"),
                          (["--speculative-model", other, "--num-speculative-tokens", "2"], "same vocabulary")]:
        for cmd in (["serve", "--port", "0"], ["run", "-n", "1"]):
            proc = run_minfer(*cmd, "--device", "cpu", *flags, check=False, timeout=60)
            assert proc.returncode == 2, (cmd, flags, proc.stderr)
            assert needle in proc.stderr, (cmd, flags, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
