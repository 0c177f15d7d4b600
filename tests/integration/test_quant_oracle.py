"""Our quant formats (kernels/formats/quant.h, driven through tests/tools/quant_tool)
against an independent oracle: the PyPI package gguf (gguf.quants), whose numpy
decoders are maintained with llama.cpp.

1. Random valid blocks are decoded by both and must agree: bit for bit where
   the decode is products only, to 1e-6 of the block's magnitude where it is
   a*q +- b (a compiler may fuse that into an FMA).
2. Our quantizers' output on random normal data decodes the same in gguf as in
   our code, and its round-trip error is printed and bounded.

gguf 0.19 cannot quantize the K types and has no Q8_K at all; Q8_K is checked
against the two-line decode from the notes (w = d * qs, f32 d) instead.
"""
import os
import pathlib
import subprocess
import zlib

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGML_QUANT_SIZES
from gguf import quants

from conftest import ROOT

# Offsets of the f16 scale fields in each block, which random bytes must not
# fill with inf/NaN.
F16_FIELDS = {
    "Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2],
    "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
}
BLOCK_TYPES = [*F16_FIELDS, "Q8_K"]
PLAIN_TYPES = ["F32", "F16", "BF16"]
# Decodes of the form a*q + b (an FMA may round differently from mul-then-add).
AFFINE = {"Q4_1", "Q5_1", "Q4_K", "Q5_K"}

# Round-trip relative RMSE bounds, ~10% above what we measure (printed by the test).
RMSE_BOUND = {
    "F32": 0.0, "F16": 3e-4, "BF16": 2e-3, "Q8_0": 6e-3, "Q8_K": 7.8e-3, "Q6_K": 0.019, "Q5_K": 0.039,
    "Q5_1": 0.042, "Q5_0": 0.047, "Q4_K": 0.078, "Q4_1": 0.086, "Q4_0": 0.095,
}


def quant_tool():
    path = os.environ.get("MINFER_QUANT_TOOL", str(ROOT / "build" / "tests" / "tools" / "quant_tool"))
    if not pathlib.Path(path).is_file():
        pytest.fail(f"quant_tool not found at {path} (build the quant_tool target or set MINFER_QUANT_TOOL)")
    return path


def run_tool(mode, type_name, data: bytes, tmp_path) -> bytes:
    src, dst = tmp_path / f"{type_name}.{mode}.in", tmp_path / f"{type_name}.{mode}.out"
    src.write_bytes(data)
    proc = subprocess.run([quant_tool(), mode, type_name, str(src), str(dst)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return dst.read_bytes()


def our_dequant(type_name, blocks: np.ndarray, tmp_path) -> np.ndarray:
    return np.frombuffer(run_tool("dequant", type_name, blocks.tobytes(), tmp_path), dtype="<f4")


def our_quant(type_name, x: np.ndarray, tmp_path) -> np.ndarray:
    return np.frombuffer(run_tool("quant", type_name, x.astype("<f4").tobytes(), tmp_path), dtype=np.uint8)


def oracle_dequant(type_name, raw: np.ndarray) -> np.ndarray:
    if type_name == "Q8_K":  # not in gguf-py: f32 d, int8 qs[256], int16 bsums[16]
        blocks = raw.reshape(-1, 292)
        d = blocks[:, :4].copy().view("<f4")
        qs = blocks[:, 4:260].copy().view(np.int8).astype(np.float32)
        return (d * qs).reshape(-1)
    return quants.dequantize(raw, QT[type_name]).reshape(-1).astype(np.float32)


def random_scales(rng, n):
    """f16 scales of every kind: normal of both signs and wide range, subnormal, zero, the largest."""
    v = rng.standard_normal(n) * np.exp2(rng.integers(-12, 6, n))
    kind = rng.integers(0, 10, n)
    v = np.where(kind == 0, rng.integers(1, 1024, n) * 2.0**-24 * rng.choice([-1, 1], n), v)  # subnormal
    v = np.where(kind == 1, 0.0, v)
    v = np.where(kind == 2, 65504.0 * rng.choice([-1, 1], n), v)
    return v.astype(np.float16)


def random_blocks(rng, type_name, n_blocks) -> np.ndarray:
    block_elems, block_bytes = GGML_QUANT_SIZES[QT[type_name]]
    raw = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    if type_name == "Q8_K":
        raw[:, :4] = (rng.standard_normal(n_blocks) * 0.01).astype("<f4").view(np.uint8).reshape(-1, 4)
    for off in F16_FIELDS.get(type_name, []):
        raw[:, off:off + 2] = random_scales(rng, n_blocks).view(np.uint8).reshape(-1, 2)
    return raw.reshape(-1)


def random_plain(rng, type_name, n) -> np.ndarray:
    if type_name == "F32":
        v = rng.integers(0, 2**32, n, dtype=np.uint32)
        v = np.where((v & 0x7F800000) == 0x7F800000, v & 0xBFFFFFFF, v)  # no inf/NaN
        return v.astype("<u4").view(np.uint8)
    v = rng.integers(0, 2**16, n, dtype=np.uint16)
    exp_mask = 0x7C00 if type_name == "F16" else 0x7F80
    v = np.where((v & exp_mask) == exp_mask, v & 0xBFFF, v).astype(np.uint16)  # no inf/NaN
    return v.astype("<u2").view(np.uint8)


@pytest.mark.parametrize("type_name", BLOCK_TYPES + PLAIN_TYPES)
def test_dequant_matches_gguf(type_name, tmp_path):
    rng = np.random.default_rng(zlib.crc32(type_name.encode()))
    if type_name in PLAIN_TYPES:
        raw = random_plain(rng, type_name, 4096)
        block_elems = 1
    else:
        block_elems = GGML_QUANT_SIZES[QT[type_name]][0]
        raw = random_blocks(rng, type_name, 256 if block_elems == 256 else 2048)
    ref = oracle_dequant(type_name, raw)
    ours = our_dequant(type_name, raw, tmp_path)
    assert ours.shape == ref.shape
    assert np.all(np.isfinite(ref))
    exact = np.array_equal(ours.view(np.uint32), ref.view(np.uint32))
    print(f"\n{type_name}: {ref.size} weights, bit-exact: {exact}")
    if type_name in AFFINE:
        scale = np.abs(ref).reshape(-1, block_elems).max(axis=1, keepdims=True)
        err = np.abs(ours - ref).reshape(-1, block_elems)
        assert np.all(err <= 1e-6 * scale), f"max error / block magnitude {np.max(err / np.maximum(scale, 1e-30))}"
    else:
        np.testing.assert_array_equal(ours.view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("type_name", BLOCK_TYPES + PLAIN_TYPES)
def test_quantize_round_trip(type_name, tmp_path):
    rng = np.random.default_rng(1234)
    x = rng.standard_normal(256 * 256).astype(np.float32)
    q = our_quant(type_name, x, tmp_path)
    block_elems, block_bytes = GGML_QUANT_SIZES[QT[type_name]]
    assert q.size == x.size // block_elems * block_bytes

    ref = oracle_dequant(type_name, q)
    ours = our_dequant(type_name, q, tmp_path)
    scale = np.abs(ref).reshape(-1, block_elems).max(axis=1, keepdims=True)
    assert np.all(np.abs(ours - ref).reshape(-1, block_elems) <= 1e-6 * scale)

    rmse = float(np.sqrt(np.mean((ref - x) ** 2) / np.mean(x**2)))
    line = f"\n{type_name}: round-trip relative RMSE {rmse:.5f} (bound {RMSE_BOUND[type_name]})"
    # gguf-py's own quantizer where it has one, for scale: ours must be no worse.
    if type_name not in ("F32", "Q8_K") and not type_name.endswith("_K"):
        theirs = quants.dequantize(quants.quantize(x, QT[type_name]), QT[type_name]).reshape(-1)
        theirs_rmse = float(np.sqrt(np.mean((theirs - x) ** 2) / np.mean(x**2)))
        line += f"; gguf-py's quantizer {theirs_rmse:.5f}"
        assert rmse <= theirs_rmse * 1.001
    print(line)
    assert rmse <= RMSE_BOUND[type_name]

    if type_name == "Q8_K":  # the group sums must be those of qs
        blocks = q.reshape(-1, 292)
        qs = blocks[:, 4:260].copy().view(np.int8).astype(np.int32).reshape(-1, 16, 16)
        bsums = blocks[:, 260:].copy().view("<i2").astype(np.int32)
        np.testing.assert_array_equal(bsums, qs.sum(axis=2))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # numpy, on 1e30 -> f16
@pytest.mark.parametrize("type_name", ["F16", "BF16"])
def test_float_conversion_bytes_match_gguf(type_name, tmp_path):
    """Our f32 -> f16/bf16 conversion (float16.h) gives gguf-py's bytes, edge values included."""
    rng = np.random.default_rng(99)
    special = np.array([0.0, -0.0, 1e-8, -3e-8, 5.9604645e-08, 2.9802322e-08, 6.1035156e-05, 6.09e-05, 65504.0,
                        65519.99, 65520.0, -1e5, 1e30, np.inf, -np.inf, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11,
                        3.0e38, -1.17e-38, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8], dtype=np.float32)
    x = np.concatenate([special, (rng.standard_normal(4096) * np.exp2(rng.integers(-30, 30, 4096))).astype(np.float32)])
    ours = our_quant(type_name, x, tmp_path)
    theirs = quants.quantize(x, QT[type_name]).view(np.uint8).reshape(-1)
    np.testing.assert_array_equal(ours, theirs)


def test_quant_tool_rejects_partial_blocks(tmp_path):
    src = tmp_path / "x.f32"
    src.write_bytes(np.zeros(33, dtype="<f4").tobytes())
    proc = subprocess.run([quant_tool(), "quant", "Q8_0", str(src), str(tmp_path / "y")], capture_output=True, text=True)
    assert proc.returncode == 1 and "Q8_0" in proc.stderr, proc.stderr
    src.write_bytes(bytes(35))
    proc = subprocess.run([quant_tool(), "dequant", "q8_0", str(src), str(tmp_path / "y")], capture_output=True, text=True)
    assert proc.returncode == 1 and "Q8_0" in proc.stderr, proc.stderr
    proc = subprocess.run([quant_tool(), "quant", "Q2_K", str(src), str(tmp_path / "y")], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
