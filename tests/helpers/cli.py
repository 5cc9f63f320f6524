"""`yui` as a real process: the checkout it runs from, and a runner for one command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def yui(
    *args: str,
    home: Path,
    check: bool = True,
    timeout: float = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real `bin/yui` as a process, with `home` as its YUI_HOME."""
    full_env = {**os.environ, "YUI_HOME": str(home), "NO_COLOR": "1", **(env or {})}
    result = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "yui"), *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"yui {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result
