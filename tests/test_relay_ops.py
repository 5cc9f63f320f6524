"""Running a relay without leaving things behind: `yui relay migrate` of a folder that holds no
relay creates nothing, `yui relay status` of a stopped relay says so with its exit code, and a
test session removes every relay it made, even one a test leaked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from relay.cluster import cluster_for, register_dir, registered_keys, relay_key
from tests.helpers.cli import ROOT, yui

pytestmark = pytest.mark.integration  # each test makes (or fails to make) a relay of its own


def test_migrate_of_a_mistyped_folder_creates_no_relay(tmp_path: Path) -> None:
    typo = tmp_path / "relya"
    result = yui("relay", "migrate", "--dir", str(typo), home=tmp_path / "home", check=False)
    assert result.returncode == 1
    first, *rest = result.stderr.splitlines()
    assert first == f"Error: no relay in {typo}" and "yui relay up" in "".join(rest)
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not typo.exists()  # no folder, no keys
    assert not cluster_for(typo).initialized()  # no cluster, so no PostgreSQL left running
    assert relay_key(typo) not in registered_keys()


def test_status_of_a_stopped_relay_exits_75_and_help_says_so(tmp_path: Path) -> None:
    result = yui("relay", "status", "--json", home=tmp_path / "home", check=False)
    assert result.returncode == 75
    shown = json.loads(result.stdout)
    assert shown["gateway"] == "stopped" and shown["postgres"] == "absent"
    assert "yui relay up" in result.stderr and "Traceback" not in result.stderr
    helped = yui("relay", "status", "--help", home=tmp_path / "home").stdout
    assert "else 75" in " ".join(helped.split())


LEAKY_TEST = """
from relay.cluster import cluster_for


def test_leaks_a_cluster(tmp_path):
    cluster = cluster_for(tmp_path / "home" / "relay")
    cluster.init()
    cluster.start()
    (tmp_path.parent / "leaked").write_text(str(cluster.data))
    # ...and never stops or removes it, as a fixture that failed halfway wouldn't
"""


def test_a_test_session_removes_every_relay_it_made_even_a_leaked_one(tmp_path: Path) -> None:
    """An inner pytest session with this suite's conftest runs one test that starts a
    PostgreSQL cluster as the fixtures do and drops it; once the session ends, nothing of it
    is left. (A leaked gateway goes the same way: tests/test_demo.py destroys one whose
    folder was deleted under it.)"""
    (tmp_path / "test_leak.py").write_text(LEAKY_TEST)
    basetemp = tmp_path / "inner"
    folder = basetemp / "test_leaks_a_cluster0" / "home" / "relay"
    key = relay_key(folder)
    session = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
            f"--basetemp={basetemp}", f"--rootdir={ROOT}", str(tmp_path / "test_leak.py"),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert session.returncode == 0, session.stdout + session.stderr
    data = Path((basetemp / "leaked").read_text())  # the cluster was made, and ran
    assert key not in registered_keys()
    assert not (register_dir() / key).exists() and not data.exists()  # wherever it lived
    assert not cluster_for(folder).running()
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _runs(p, data)]


def _runs(proc: Path, data: Path) -> bool:
    """Whether `proc` is a PostgreSQL serving the data folder `data`."""
    try:
        args = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(data).encode() in args
