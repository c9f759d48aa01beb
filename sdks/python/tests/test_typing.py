"""The package type-checks with mypy --strict (it ships py.typed)."""
import subprocess
import sys
from pathlib import Path

import pytest

import chargeonce


def test_mypy_strict() -> None:
    pytest.importorskip("mypy")
    assert (Path(chargeonce.__file__).parent / "py.typed").exists(), "the installed package ships py.typed"
    # The source tree (mypy refuses to check a package inside site-packages).
    package = Path(__file__).resolve().parents[1] / "src" / "chargeonce"
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(package)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
