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
