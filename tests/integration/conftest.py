import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
MODEL = ROOT / "models" / "stories260K.gguf"


def minfer_bin():
    return os.environ.get("MINFER_BIN", str(ROOT / "build" / "minfer"))


def run_minfer(*args, check=True, timeout=120, input=None):
    """Runs the real binary; returns CompletedProcess with text output."""
    proc = subprocess.run([minfer_bin(), *map(str, args)], capture_output=True, text=True, timeout=timeout, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"minfer {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
    return proc


@pytest.fixture
def minfer():
    return run_minfer


@pytest.fixture(scope="session")
def draft_model(tmp_path_factory):
    """The bundled model with Gaussian noise (0.1 x each tensor's RMS) on every
    weight, written with the gguf package: a draft model with the target's
    vocabulary that agrees with it often, not always."""
    import shutil

    import gguf
    import numpy as np

    path = tmp_path_factory.mktemp("draft") / "stories260K-perturbed.gguf"
    shutil.copy(MODEL, path)
    reader = gguf.GGUFReader(path, "r+")
    rng = np.random.default_rng(7)
    for t in reader.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, t.name
        rms = float(np.sqrt(np.mean(np.square(t.data, dtype=np.float64))))
        t.data[...] += (0.1 * rms * rng.standard_normal(t.data.shape)).astype(np.float32)
    del reader  # flushes the memory map
    return path
