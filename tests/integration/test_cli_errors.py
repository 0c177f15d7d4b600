"""Bad input of every kind: one clear line on stderr and a non-zero exit, never a crash."""
import pytest

from conftest import MODEL, ROOT, run_minfer


def assert_clean_failure(proc, *needles):
    assert proc.returncode in (1, 2), proc.returncode  # not a signal, not 0
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("args,needle", [
    (["run", "--temp", "-1"], "temperature"),
    (["run", "--top-p", "0"], "top_p"),
    (["run", "-n", "-5"], "-n"),
    (["run", "--logit-bias", "abc"], "logit-bias"),
    (["run", "--logit-bias", "99999=1"], "logit_bias"),
    (["run", "--no-such-flag"], "no-such-flag"),
    (["run", "--temp", "warm"], "warm"),
    (["run", "--block-size", "0"], "block-size"),
    (["run", "--threads", "-3"], "--threads must be >= 0"),
    (["run", "one", "two"], "unexpected argument 'two'"),
    (["nosuchcommand"], "unknown command"),
    (["serve", "--gpu-memory-utilization", "1.5"], "gpu-memory-utilization"),
    (["serve", "--gpu-memory-utilization", "0"], "gpu-memory-utilization"),
    (["serve", "--gpu-memory-utilization", "most"], "most"),
    (["run", "--quantization", "int4"], "--quantization must be none or fp8"),
    (["run", "--device", "cpu", "--quantization", "fp8", "-n", "1"], "--quantization fp8 needs --device cuda"),
    (["serve", "--kv-cache-dtype", "fp8"], "--kv-cache-dtype must be auto, float32 or bfloat16"),
    (["grammar"], "usage: minfer grammar check"),
    (["grammar", "verify"], "usage: minfer grammar check"),
    (["grammar", "check", "--regex", "a+"], "--input is required"),
    (["grammar", "bench", "model.gguf", "/nonexistent-dir"], "is not a directory"),
    (["serve", "--tool-call-parser", "xml"], "--tool-call-parser must be hermes, llama3_json, mistral, json or auto"),
    (["generate", "--input", "nowhere.jsonl", "--output", "o.jsonl", "--kv-cache-dtype", "half"], "--kv-cache-dtype must be auto, float32 or bfloat16"),
    (["bench", "latency", "--kv-cache-dtype", "int8"], "--kv-cache-dtype must be auto, float32 or bfloat16"),
    (["bench", "latency", "--output-len", "8", "--profile-steps", "8"], "--profile-steps must be in 0..7"),
    (["bench", "latency", "--profile-steps=-1"], "--profile-steps must be in"),
    (["serve", "--kv-role", "router"], "--kv-role must be prefill, decode or both"),
    (["serve", "--kv-transfer-port", "9000"], "--kv-transfer-port needs --kv-role"),
    (["serve", "--kv-role", "decode"], "a decode instance receives KV over TCP (--kv-transfer-port) or MPI"),
    (["serve", "--kv-role", "prefill", "--kv-transfer-port", "0"], "a prefill instance receives no KV"),
    (["serve", "--kv-role", "decode", "--kv-transfer-port", "70000"], "--kv-transfer-port must be in 0..65535"),
    (["serve", "--kv-role", "decode", "--kv-transfer-port", "0", "--kv-transfer-timeout", "0"], "--kv-transfer-timeout must be in"),
    (["serve", "--kv-role", "both", "-tp", "2"], "--kv-role runs each instance whole: -tp must be 1"),
])
def test_bad_flags(args, needle):
    assert_clean_failure(run_minfer(*args, check=False), needle)


def test_missing_and_bad_files(tmp_path):
    assert_clean_failure(run_minfer("run", tmp_path / "absent.gguf", check=False), "absent.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    assert_clean_failure(run_minfer("run", junk, check=False), "junk.gguf")
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(MODEL.read_bytes()[:500_000])
    assert_clean_failure(run_minfer("run", truncated, check=False), "truncated.gguf")
    vocab_only = ROOT.parent / "shared" / "vocab" / "ggml-vocab-llama-spm.gguf"
    assert_clean_failure(run_minfer("run", vocab_only, check=False), "token_embd.weight")


def test_prompt_longer_than_the_context():
    proc = run_minfer("run", "-p", "word " * 600, "-n", 1, check=False)
    assert_clean_failure(proc, "context")


def test_help_and_version():
    assert "--prompt" in run_minfer("run", "--help").stdout
    v = run_minfer("--version").stdout
    assert v.startswith("minfer ") and "backends: cpu" in v


def test_a_gpu_that_does_not_answer():
    # --version says whether the CUDA compiled in finds a device; --device cuda
    # without one is one line that says why (no source path).
    v = run_minfer("--version").stdout
    if "cuda" not in v.splitlines()[1]:
        pytest.skip("this build has no CUDA backend")
    devices = next(l for l in v.splitlines() if l.startswith("cuda devices: "))
    if "no device answers" not in devices:
        pytest.skip(f"a GPU answers here: {devices}")
    proc = run_minfer("run", MODEL, "--device", "cuda", "-n", "1", check=False)
    assert_clean_failure(proc, "no CUDA device answers")
    assert ".cpp:" not in proc.stderr


def test_bad_grammar_files(tmp_path):
    assert_clean_failure(run_minfer("run", "--grammar-file", tmp_path / "absent.gbnf", check=False), "cannot read")
    bad = tmp_path / "bad.gbnf"
    bad.write_text('root ::= item\nitem ::= "a" (\n')
    assert_clean_failure(run_minfer("run", "--grammar-file", bad, check=False), "bad.gbnf", "line 3, column 1", "expected ')'")
    assert_clean_failure(run_minfer("run", "--regex", "(a", check=False), "--regex: line 1, column 3: expected ')'")
    assert_clean_failure(run_minfer("run", "--regex", "a", "--grammar-file", bad, check=False), "one constraint at a time")
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "integer", "multipleOf": 3}')
    assert_clean_failure(run_minfer("run", "--json-schema", schema, check=False), "schema.json", "'multipleOf' is not supported yet")
    schema.write_text('{"type": ')
    assert_clean_failure(run_minfer("run", "--json-schema", schema, check=False), "not valid JSON")
