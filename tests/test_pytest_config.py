"""The test command says why each skipped test skipped (issue #29: ``-q`` hid why 7 tests
skipped): the project's pytest options, run on a test that skips."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_skipped_test_s_reason_is_printed(tmp_path):
    test = tmp_path / "test_skips.py"
    test.write_text("import pytest\n\n\ndef test_x():\n"
                    "    pytest.skip('no chromium-driver: the dashboard test skips')\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"),
                           "--rootdir", str(tmp_path), "-p", "no:cacheprovider", str(test)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SKIPPED" in done.stdout and "no chromium-driver" in done.stdout
