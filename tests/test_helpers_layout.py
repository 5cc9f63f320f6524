"""Shared test code lives in tests/helpers/: no test module imports another test module or
conftest (pytest hands out conftest's fixtures by name), and no helper imports a test module.
Importing a test module runs its module-level code and can register its fixtures twice."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported(path: Path) -> set[str]:
    """The dotted modules a file imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_shared_code_is_imported_only_from_tests_helpers() -> None:
    wrong = {
        f"{path.relative_to(TESTS.parent)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in imported(path)
        if name == "tests.conftest" or name.startswith("tests.test_")
    }
    assert not wrong


def test_imports_are_absolute_so_the_rule_above_sees_them() -> None:
    wrong = {
        str(path.relative_to(TESTS.parent))
        for path in sorted(TESTS.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.level
    }
    assert not wrong
