"""The README quickstart runs and its bound holds."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # .ci/run runs it by name
def test_quickstart_script():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py"), "--rows", "20000",
         "--features", "32", "--sketch-size", "8"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "bound holds" in result.stdout
