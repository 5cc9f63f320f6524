"""The import rules of the README's "Layout", checked on every module: packages import one way,
Yui Lines stands alone, the bridges and the relay share a contract and never code, inside
`bridges/` each room uses only the rooms below it, and test code shares only `tests/helpers/`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

# Each top-level package, and ours it may import.
PACKAGES = {
    "yuilines": set(),
    "state": set(),
    "relay": {"state", "yuilines"},
    "bridges": {"state", "yuilines"},
    "people": {"bridges", "state", "yuilines"},
    "yui_cli": {"bridges", "people", "relay", "state", "yuilines"},
}
# Each room of `bridges/`, and the rooms it may import (its own is always fine).
ROOMS = {
    "retry": set(),
    "client": {"retry"},
    "media": {"client", "retry"},
    "controls": {"client", "retry"},
    "engine": {"client", "controls", "media", "retry"},
    "webhook": {"client", "controls", "engine", "retry"},
    "model": {"client", "controls", "engine", "retry"},
    "a2a": {"client", "engine", "media", "retry"},
    "send": {"client", "engine", "media", "retry"},
    "hermes": {"client", "controls", "engine", "media", "retry", "send"},
}


def imported(path: Path) -> set[str]:
    """The dotted modules a file imports, TYPE_CHECKING imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_packages_import_one_way(package: str) -> None:
    wrong = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules(package)
        for name in imported(path)
        if (top := name.split(".")[0]) in PACKAGES
        and top != package
        and top not in PACKAGES[package]
    }
    assert not wrong


def room_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "bridges" and len(parts) > 1 else None


def test_every_room_of_bridges_is_listed() -> None:
    rooms = {p.stem if p.is_file() else p.name for p in (ROOT / "bridges").iterdir()}
    assert rooms - {"__init__", "__pycache__"} == set(ROOMS)


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_rooms_of_bridges_import_only_rooms_below(room: str) -> None:
    base = ROOT / "bridges" / room
    paths = modules(f"bridges/{room}") if base.is_dir() else [base.with_suffix(".py")]
    wrong = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in paths
        for name in imported(path)
        if (other := room_of(name)) is not None and other != room and other not in ROOMS[room]
    }
    assert not wrong


def test_only_the_client_spells_the_wire_contract() -> None:
    spelled = {
        str(path.relative_to(ROOT))
        for package in ("bridges", "people", "yui_cli")
        for path in modules(package)
        if any(
            wire in path.read_text(encoding="utf-8")
            for wire in ("/rest/v1", "/functions/v1", "/storage/v1", "/realtime/v1")
        )
    }
    assert spelled == {"bridges/client/relay.py"}


def test_tests_share_code_only_through_tests_helpers() -> None:
    """No test module imports another test module or conftest (pytest hands out conftest's
    fixtures by name): importing a test module runs its module-level code and can register its
    fixtures twice."""
    wrong = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in imported(path)
        if name == "tests.conftest" or name.startswith("tests.test_")
    }
    assert not wrong


def test_test_imports_are_absolute_so_the_rule_above_sees_them() -> None:
    wrong = {
        str(path.relative_to(ROOT))
        for path in sorted(TESTS.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.level
    }
    assert not wrong
