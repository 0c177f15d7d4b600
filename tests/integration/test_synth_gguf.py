"""`minfer synth` files read by an independent reader: the PyPI package gguf
(GGUFReader, gguf.quants), maintained with llama.cpp.

The expected shapes, types (llama.cpp's Q4_K_M mix included) and metadata are
written out again here from the model shapes and from llama.cpp's rules, not
taken from our code. Values: every dtype's tensors, decoded by gguf, equal the
f32 file's values within that type's rounding error.

Files: tiny and l134m in every dtype, qwen2-0.5b in q4_k_m (its Q5_0/Q8_0
fallbacks) with q8_0 as its value reference (an f32 qwen2 file is 2 GB).
"""
import functools
import json

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType
from gguf.quants import dequantize

from conftest import run_minfer

DTYPES = ["f32", "f16", "bf16", "q8_0", "q4_k_m"]
LLAMA_FTYPE = {"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_k_m": 15}

# The real models' shapes (synth --list); hd = dim / heads.
PRESETS = {
    "tiny": dict(arch="llama", dim=256, layers=2, heads=4, kv=2, ffn=512, vocab=1024, ctx=2048, tied=False,
                 bias=False, base=10000.0, eps=1e-5),
    "l134m": dict(arch="llama", dim=768, layers=12, heads=12, kv=12, ffn=2048, vocab=32000, ctx=2048, tied=False,
                  bias=False, base=10000.0, eps=1e-5),
    "qwen2-0.5b": dict(arch="qwen2", dim=896, layers=24, heads=14, kv=2, ffn=4864, vocab=151936, ctx=32768,
                       tied=True, bias=True, base=1000000.0, eps=1e-6),
}


def expected_tensors(p):
    """name -> (GGUF shape ne, role, layer)."""
    hd = p["dim"] // p["heads"]
    q, kv = p["heads"] * hd, p["kv"] * hd
    out = {"token_embd.weight": ([p["dim"], p["vocab"]], "token_embd", -1),
           "output_norm.weight": ([p["dim"]], "norm", -1)}
    if not p["tied"]:
        out["output.weight"] = ([p["dim"], p["vocab"]], "output", -1)
    for i in range(p["layers"]):
        b = f"blk.{i}."
        out.update({
            b + "attn_norm.weight": ([p["dim"]], "norm", i), b + "ffn_norm.weight": ([p["dim"]], "norm", i),
            b + "attn_q.weight": ([p["dim"], q], "attn_q", i), b + "attn_k.weight": ([p["dim"], kv], "attn_k", i),
            b + "attn_v.weight": ([p["dim"], kv], "attn_v", i), b + "attn_output.weight": ([q, p["dim"]], "attn_output", i),
            b + "ffn_gate.weight": ([p["dim"], p["ffn"]], "ffn_gate", i), b + "ffn_up.weight": ([p["dim"], p["ffn"]], "ffn_up", i),
            b + "ffn_down.weight": ([p["ffn"], p["dim"]], "ffn_down", i),
        })
        if p["bias"]:
            out.update({b + "attn_q.bias": ([q], "bias", i), b + "attn_k.bias": ([kv], "bias", i),
                        b + "attn_v.bias": ([kv], "bias", i)})
    return out


def q4_k_m(role, layer, n_layers, ncols, tied):
    """llama.cpp's llama_tensor_get_type for LLAMA_FTYPE_MOSTLY_Q4_K_M (dense, non-Falcon model)."""
    more_bits = layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2
    if role == "output" or (tied and role == "token_embd"):
        t = QT.Q8_0 if ncols % 256 else QT.Q6_K
    elif role in ("attn_v", "ffn_down") and more_bits:
        t = QT.Q6_K
    else:
        t = QT.Q4_K
    if ncols % 256:  # tensor_type_fallback
        t = {QT.Q4_K: QT.Q5_0, QT.Q5_K: QT.Q5_1, QT.Q6_K: QT.Q8_0}.get(t, t)
    return t


def expected_type(p, dtype, role, layer, ncols):
    if role in ("norm", "bias"):
        return QT.F32
    if dtype == "q4_k_m":
        return q4_k_m(role, layer, p["layers"], ncols, p["tied"])
    return {"f32": QT.F32, "f16": QT.F16, "bf16": QT.BF16, "q8_0": QT.Q8_0}[dtype]


# Relative RMS error of a decoded tensor against the f32 values; about twice what we measure.
RMSE_BOUND = {QT.F32: 0.0, QT.F16: 5e-4, QT.BF16: 4e-3, QT.Q8_0: 0.011, QT.Q6_K: 0.035, QT.Q5_0: 0.08,
              QT.Q4_K: 0.14}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    out = {}
    for preset, dtypes in [("tiny", DTYPES), ("l134m", DTYPES), ("qwen2-0.5b", ["q8_0", "q4_k_m"])]:
        for dtype in dtypes:
            path = d / f"{preset}-{dtype}.gguf"
            run_minfer("synth", "--preset", preset, "--dtype", dtype, "-o", path, timeout=300)
            out[preset, dtype] = path
    return out


@functools.lru_cache(maxsize=None)
def read(path):
    """GGUFReader is slow on large vocabularies (pure Python): read each file once."""
    return GGUFReader(path)


def field(reader, key):
    f = reader.fields[key]
    return f.types, f.contents()


@pytest.mark.parametrize("preset,dtype", [(p, d) for p in ("tiny", "l134m") for d in DTYPES] + [("qwen2-0.5b", "q4_k_m")])
def test_reader_sees_the_shapes_types_and_metadata_we_claim(files, preset, dtype):
    p = PRESETS[preset]
    r = read(files[preset, dtype])
    a = p["arch"] + "."

    assert field(r, "general.architecture") == ([GGUFValueType.STRING], p["arch"])
    assert field(r, "general.file_type") == ([GGUFValueType.UINT32], LLAMA_FTYPE[dtype])
    for key, want in [("context_length", p["ctx"]), ("embedding_length", p["dim"]), ("block_count", p["layers"]),
                      ("feed_forward_length", p["ffn"]), ("attention.head_count", p["heads"]),
                      ("attention.head_count_kv", p["kv"]), ("rope.dimension_count", p["dim"] // p["heads"])]:
        assert field(r, a + key) == ([GGUFValueType.UINT32], want), key  # llama.cpp wants u32 exactly
    types, base = field(r, a + "rope.freq_base")
    assert types == [GGUFValueType.FLOAT32] and base == pytest.approx(p["base"])
    types, eps = field(r, a + "attention.layer_norm_rms_epsilon")
    assert types == [GGUFValueType.FLOAT32] and eps == pytest.approx(p["eps"])
    assert field(r, "tokenizer.ggml.model")[1] == "llama"
    tokens = field(r, "tokenizer.ggml.tokens")[1]
    assert len(tokens) == p["vocab"] and len(set(tokens)) == p["vocab"]
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and tokens[3 + 0x41] == "<0x41>"
    assert len(field(r, "tokenizer.ggml.scores")[1]) == p["vocab"]
    assert field(r, "tokenizer.ggml.bos_token_id")[1] == 1

    want = expected_tensors(p)
    assert sorted(t.name for t in r.tensors) == sorted(want)
    for t in r.tensors:
        shape, role, layer = want[t.name]
        assert [int(x) for x in t.shape] == shape, t.name
        assert t.tensor_type == expected_type(p, dtype, role, layer, shape[0]), t.name

    # llama.cpp's strict layout: tensors packed in order, each padded to 32 bytes, the file ends after the last.
    at = r.tensors[0].data_offset
    for t in r.tensors:
        assert t.data_offset == at, t.name
        at += (int(t.n_bytes) + 31) // 32 * 32
    assert at == files[preset, dtype].stat().st_size


def decoded(tensor, rows=None):
    """Rows of a tensor as float32 [rows, ne0], decoded by gguf."""
    data = tensor.data if rows is None or len(tensor.shape) == 1 else tensor.data[:rows]
    ne0 = int(tensor.shape[0])
    return dequantize(np.asarray(data), tensor.tensor_type).reshape(-1, ne0).astype(np.float32)


def rel_rmse(got, want):
    return float(np.sqrt(np.mean((got - want) ** 2) / np.mean(want ** 2)))


@pytest.mark.parametrize("preset", ["tiny", "l134m"])
def test_every_dtype_decodes_to_the_f32_values(files, preset):
    n = PRESETS[preset]["layers"]
    names = ["token_embd.weight", "output.weight", "blk.0.attn_q.weight", f"blk.{n - 1}.attn_v.weight",
             "blk.0.attn_v.weight", f"blk.{n - 1}.ffn_down.weight", "blk.0.ffn_down.weight", "blk.0.attn_norm.weight"]
    ref = {t.name: t for t in read(files[preset, "f32"]).tensors}
    seen = set()
    for dtype in DTYPES[1:]:
        tensors = {t.name: t for t in read(files[preset, dtype]).tensors}
        for name in names:
            t = tensors[name]
            want = decoded(ref[name], 512)
            got = decoded(t, 512)
            err = rel_rmse(got, want)
            assert err <= RMSE_BOUND[t.tensor_type], (dtype, name, t.tensor_type.name, err)
            # No value far off: the worst error stays within a fraction of the row's range.
            assert np.max(np.abs(got - want)) <= 0.25 * np.max(np.abs(want)) + 1e-6, (dtype, name)
            if t.tensor_type == QT.F16:  # f16 is exactly numpy's round-to-nearest-even
                assert np.array_equal(np.asarray(t.data[:512]), want.astype(np.float16))
            seen.add(t.tensor_type)
    assert {QT.F16, QT.BF16, QT.Q8_0, QT.Q4_K, QT.Q6_K, QT.F32} <= seen
    # The f32 weights are N(0, 1/sqrt(row length)); norms are about 1.
    q = decoded(ref["blk.0.attn_q.weight"])
    assert q.std() == pytest.approx(1 / np.sqrt(q.shape[1]), rel=0.05) and abs(q.mean()) < 1e-3
    assert decoded(ref["blk.0.attn_norm.weight"]).mean() == pytest.approx(1.0, abs=0.02)


def test_qwen2_q4_k_m_fallbacks_decode_to_the_same_values(files):
    """Q8_0 tensors of the q4_k_m file are byte-identical to the q8_0 file's (same f32 values, same
    quantizer); its Q5_0 and K tensors decode close to the q8_0 file's values."""
    q8 = {t.name: t for t in read(files["qwen2-0.5b", "q8_0"]).tensors}
    mix = {t.name: t for t in read(files["qwen2-0.5b", "q4_k_m"]).tensors}
    for name in ["token_embd.weight", "blk.0.attn_v.weight", "blk.23.attn_v.weight"]:
        assert mix[name].tensor_type == QT.Q8_0
        assert np.array_equal(np.asarray(mix[name].data[:1024]), np.asarray(q8[name].data[:1024])), name
    for name in ["blk.0.attn_q.weight", "blk.3.attn_v.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_down.weight",
                 "blk.3.ffn_down.weight"]:
        got, want = decoded(mix[name], 256), decoded(q8[name], 256)
        bound = RMSE_BOUND[mix[name].tensor_type] + RMSE_BOUND[QT.Q8_0]
        assert rel_rmse(got, want) <= bound, (name, mix[name].tensor_type.name)
    for name in ["blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias"]:
        assert np.array_equal(np.asarray(mix[name].data), np.asarray(q8[name].data))


def test_qwen2_q4_k_m_file_runs(files):
    proc = run_minfer("run", files["qwen2-0.5b", "q4_k_m"], "-p", "Hello world", "-n", "3", "--temp", "0", "--json",
                      timeout=300)
    out = json.loads(proc.stdout)
    assert out["prompt_ids"][0] == 1 and len(out["generated_ids"]) == 3


@pytest.mark.parametrize("dtype", ["f32", "q4_k_m"])
def test_synthetic_in_memory_is_the_file(files, dtype):
    """--synthetic builds the same model in memory: same tensors, same generation."""
    on_disk = json.loads(run_minfer("inspect", files["tiny", dtype], "--json").stdout)
    in_memory = json.loads(run_minfer("inspect", "--synthetic", f"tiny:{dtype}", "--json").stdout)
    assert in_memory["file"] == f"synthetic:tiny:{dtype}"
    for key in ("file_size", "tensors", "metadata", "totals"):
        assert in_memory[key] == on_disk[key], key
    args = ["-p", "Hello world", "-n", "6", "--temp", "0", "--json"]
    assert (json.loads(run_minfer("run", "--synthetic", f"tiny:{dtype}", *args).stdout)
            == json.loads(run_minfer("run", files["tiny", dtype], *args).stdout))


def test_synthetic_tokenizer():
    out = run_minfer("tokenize", "--synthetic", "l134m", "--text", "Hello world").stdout.splitlines()
    assert [line.split("\t")[1] for line in out] == ["<s>", "\u2581Hello", "\u2581world"]
    for spec in ["llama3-8b", "qwen2-0.5b:q4_k_m"]:  # vocabulary only: no weights are generated
        ids = json.loads(run_minfer("tokenize", "--synthetic", spec, "--text", "Hello world", "--json").stdout)["ids"]
        assert len(ids) == 3


def test_fewer_layers_are_the_first_blocks(files, tmp_path):
    """--layers N (gpu.sh --profile's small models): the same tensors, only blocks 0..N-1."""
    path = tmp_path / "l134m-f32-L2.gguf"
    run_minfer("synth", "--preset", "l134m", "--dtype", "f32", "--layers", "2", "-o", path, timeout=300)
    whole, few = read(files["l134m", "f32"]), read(path)
    assert field(few, "llama.block_count") == ([GGUFValueType.UINT32], 2)
    kept = {t.name: t for t in few.tensors}
    want = {n for n in expected_tensors(PRESETS["l134m"]) if not n.startswith("blk.") or int(n.split(".")[1]) < 2}
    assert set(kept) == want
    for t in whole.tensors:
        if t.name in kept:
            assert np.array_equal(t.data, kept[t.name].data), t.name


@pytest.mark.parametrize("args,needle", [
    (["synth", "--preset", "nope", "-o", "x.gguf"], "unknown preset"),
    (["synth", "--preset", "l134m", "--layers", "0", "-o", "x.gguf"], "--layers must be in 1..12"),
    (["synth", "--preset", "tiny", "--layers", "3", "-o", "x.gguf"], "--layers must be in 1..2"),
    (["synth", "--preset", "tiny", "--dtype", "q3_k", "-o", "x.gguf"], "--dtype"),
    (["synth", "--preset", "tiny"], "-o"),
    (["run", "--synthetic", "nope"], "unknown synthetic preset"),
    (["tokenize", "--synthetic", "tiny:q9", "--text", "a"], "unknown synthetic dtype"),
    (["inspect", "some.gguf", "--synthetic", "tiny"], "not both"),
])
def test_bad_synth_flags(args, needle):
    proc = run_minfer(*args, check=False)
    assert proc.returncode == 2
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
