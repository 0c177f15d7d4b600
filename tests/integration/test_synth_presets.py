"""Every synthetic preset in every dtype loads and generates (`--synthetic`).

The small presets run in every CI pass (tiny and l134m in every dtype are also
checked against their f32 logits by the unit tests). The large ones take
minutes to quantize and gigabytes of memory, so they run only with
MINFER_SLOW_TESTS=1, and are skipped when the machine lacks the memory:
llama3-8b at f32 is 32 GB.
"""
import json
import os

import pytest

from conftest import run_minfer

DTYPES = ["f32", "f16", "bf16", "q8_0", "q4_k_m"]
# Parameters (as Hugging Face counts them) and vocabulary size of each preset.
PRESETS = {"tiny": (1.6e6, 1024), "l134m": (134e6, 32000), "qwen2-0.5b": (494e6, 151936),
           "llama3-1b": (1.50e9, 128256), "llama3-8b": (8.03e9, 128256),
           "llama3-70b": (70.55e9, 128256),
           "qwen3moe-tiny": (3.9e6, 1024), "qwen2moe-tiny": (5.0e6, 1024), "mixtral-tiny": (3.9e6, 1024),
           "qwen2moe-a2.7b": (14.3e9, 151936), "qwen3moe-30b-a3b": (30.5e9, 151936), "mixtral-8x7b": (46.7e9, 32000)}
BYTES_PER_PARAM = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 1.07, "q4_k_m": 0.6}
FAST = ({(p, d) for p in ("tiny", "l134m", "qwen3moe-tiny", "qwen2moe-tiny", "mixtral-tiny") for d in DTYPES}
        | {("qwen2-0.5b", "q8_0"), ("llama3-1b", "q8_0")})
SLOW = os.environ.get("MINFER_SLOW_TESTS") == "1"


def available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.mark.parametrize("preset,dtype", [(p, d) for p in PRESETS for d in DTYPES])
def test_preset_loads_and_generates(preset, dtype):
    if (preset, dtype) not in FAST and not SLOW:
        pytest.skip("large preset: set MINFER_SLOW_TESTS=1")
    params, vocab = PRESETS[preset]
    need = params * BYTES_PER_PARAM[dtype] * 1.1
    if need > 0.9 * available_bytes():
        pytest.skip(f"needs ~{need / 1e9:.0f} GB of memory, {available_bytes() / 1e9:.0f} GB available")
    out = run_minfer("run", "--synthetic", f"{preset}:{dtype}", "-p", "The little dog", "-n", "3", "--temp", "0",
                     "--ignore-eos", "--json", timeout=1800)
    j = json.loads(out.stdout)
    assert j["prompt_ids"][0] == 1  # BOS of the synthetic SentencePiece vocabulary
    assert len(j["generated_ids"]) == 3
    assert all(0 <= t < vocab for t in j["generated_ids"])
    assert j["finish_reason"] == "length"
