"""`minfer run` on the bundled model reproduces llama2.c run.c's greedy tokens."""
import json
import re

import pytest

from conftest import MODEL, SHARED, run_minfer

CASES = json.loads((SHARED / "reference" / "stories260K" / "run_c_greedy.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['prompt'] or '<empty>'}-{c['steps']}")
@pytest.mark.parametrize("batch_tokens", [512, 3])  # whole prompt in one step, or chunked prefill
@pytest.mark.parametrize("spec", [[], ["--speculative-method", "ngram", "--num-speculative-tokens", "4"],
                                  ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 7, '
                                                           '"prompt_lookup_min": 2, "prompt_lookup_max": 3}']],
                         ids=["plain", "ngram-4", "ngram-7-config"])
def test_greedy_matches_llama2c(case, batch_tokens, spec):
    # run.c's `steps` counts positions including the prompt; it samples
    # steps - len(prompt_ids) + 1 tokens and stops early after sampling BOS.
    # Speculation changes nothing of greedy output: the same tokens, verified several at a time.
    n = case["steps"] - len(case["prompt_ids"]) + 1
    out = run_minfer("run", MODEL, "-p", case["prompt"], "-n", n, "--temp", 0, "--json",
                     "--batch-tokens", batch_tokens, *spec)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if spec:
        drafts = re.search(r"speculative decoding \(ngram, k=\d\): (\d+) drafts, (\d+) draft tokens, (\d+) accepted",
                           out.stderr)
        assert drafts and int(drafts[1]) > 0, out.stderr  # it did speculate
    assert got["prompt_ids"] == case["prompt_ids"]
    assert got["generated_ids"] == case["generated_ids"]
    # run.c prints the prompt and the generation, then a newline.
    assert got["text"] == case["text"].rstrip("\n")


@pytest.mark.parametrize("k", [1, 4])
def test_greedy_with_a_draft_model_matches_llama2c(draft_model, k):
    # A perturbed copy of the model proposes; the target's greedy tokens are llama2.c's all the same.
    accepted = drafted = 0
    for case in CASES:
        n = case["steps"] - len(case["prompt_ids"]) + 1
        out = run_minfer("run", MODEL, "-p", case["prompt"], "-n", n, "--temp", 0, "--json",
                         "--speculative-model", draft_model, "--num-speculative-tokens", k)
        assert json.loads(out.stdout.strip().splitlines()[-1])["generated_ids"] == case["generated_ids"]
        m = re.search(r"\(draft, k=\d+\): (\d+) drafts, (\d+) draft tokens, (\d+) accepted", out.stderr)
        drafted += int(m[2])
        accepted += int(m[3])
    assert 0 < accepted < drafted  # the draft differs from the target, and often agrees


def test_kv_cache_dtypes_against_llama2c():
    # float32 is exact; bfloat16 rounds keys and values once, which changes a few
    # continuations of the reference, the same ones `minfer generate` changes.
    def ids(case, dtype):
        n = case["steps"] - len(case["prompt_ids"]) + 1
        out = run_minfer("run", MODEL, "-p", case["prompt"], "-n", n, "--temp", 0, "--json", "--kv-cache-dtype", dtype)
        return json.loads(out.stdout.strip().splitlines()[-1])["generated_ids"]
    assert all(ids(c, "float32") == c["generated_ids"] for c in CASES)
    same = sum(ids(c, "bfloat16") == c["generated_ids"] for c in CASES)
    assert len(CASES) - 3 <= same < len(CASES)  # bf16 is really used, and stays close


def test_default_model_and_streaming_text():
    out = run_minfer("run", "-p", "Once upon a time", "-n", 20, "--temp", 0)
    assert out.stdout.startswith("Once upon a time, there was a little girl named Lily.")
    assert "tok/s" in out.stderr and re.search(r"time to first token: [0-9.]+ ms", out.stderr), out.stderr
    # --threads sizes the CPU backend's pool; the text is the same on one thread.
    one = run_minfer("run", "-p", "Once upon a time", "-n", 20, "--temp", 0, "--threads", 1)
    assert one.stdout == out.stdout


def test_seeded_sampling_is_reproducible():
    args = ["run", "-p", "The cat", "-n", 40, "--temp", 1.0, "--top-k", 0, "--top-p", 1.0, "--min-p", 0, "--json"]
    a = json.loads(run_minfer(*args, "--seed", 5).stdout)
    b = json.loads(run_minfer(*args, "--seed", 5).stdout)
    c = json.loads(run_minfer(*args, "--seed", 6).stdout)
    assert a["generated_ids"] == b["generated_ids"]
    assert a["generated_ids"] != c["generated_ids"]


def test_ignore_eos_runs_to_n():
    case = next(c for c in CASES if c["prompt"] == "Lily" and c["steps"] == 256)  # stops on BOS at 224
    out = json.loads(run_minfer("run", "-p", "Lily", "-n", 240, "--temp", 0, "--json", "--ignore-eos").stdout)
    assert len(out["generated_ids"]) == 240
    assert out["generated_ids"][:224] == case["generated_ids"]
    assert out["finish_reason"] == "length"


def test_generation_stops_at_the_context():
    out = json.loads(run_minfer("run", "-n", 1000, "--temp", 0, "--json", "--ignore-eos").stdout)
    assert len(out["prompt_ids"]) + len(out["generated_ids"]) == 512 + 1  # the last token has no position left


def test_chat_without_a_template_warns():
    # The bundled model has no tokenizer.chat_template: --chat says it falls back to chatml.
    out = run_minfer("run", "--chat", "-p", "Hi", "-n", 3, "--temp", 0)
    assert "has no chat template" in out.stderr and "chatml" in out.stderr
    named = run_minfer("run", "--chat", "--chat-template", "chatml", "-p", "Hi", "-n", 3, "--temp", 0)
    assert "has no chat template" not in named.stderr
    assert named.stdout == out.stdout
