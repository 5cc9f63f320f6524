"""`yui hermes install` and `hermes -p P yui …` against the real Hermes, no relay needed.

The install links the plug-in, enables it and the platform, keeps every other line of the
profile's config (comments included) and is a no-op the second time; Hermes then loads it and
`hermes -p P yui` answers with the toolkit's messages and exit codes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridges.hermes.install import FOLDER
from tests.helpers.hermes import HermesMachine, hermes_missing
from tests.helpers.relay import LocalRelay

pytestmark = pytest.mark.skipif(bool(hermes_missing()), reason=hermes_missing() or "")

CONFIG = """# my own notes stay
model:
  default: my-model   # and this one
plugins:
  enabled:
  - other
display:
  compact: true
"""


@pytest.fixture
def host(tmp_path: Path) -> HermesMachine:
    unused = LocalRelay("http://127.0.0.1:9", tmp_path, "", "", "", "")
    return HermesMachine(tmp_path, unused)


def test_install_links_and_enables_and_changes_nothing_else(host: HermesMachine) -> None:
    home = host.profile_home("coach")
    home.mkdir(parents=True)
    (home / "config.yaml").write_text(CONFIG)
    first = json.loads(host.yui("hermes", "install", "coach", "--json").stdout)
    assert first["changed"] == [
        f"linked {home / 'plugins' / 'yui'}",
        "plugins.enabled += yui",
        "platforms.yui.enabled: true",
    ]
    assert (home / "plugins" / "yui").resolve() == FOLDER
    assert (home / "config.yaml").read_text() == CONFIG.replace(
        "  - other\n", "  - other\n  - yui\n"
    ) + "platforms:\n  yui:\n    enabled: true\n"
    again = host.yui("hermes", "install", "coach")
    assert again.stdout.strip() == "coach: already installed, nothing changed"
    listed = host.hermes("-p", "coach", "yui").stdout  # Hermes loads it: its commands
    assert [
        line.split()[0] for line in listed.split("Commands:")[1].splitlines() if line.strip()
    ] == ["add", "install", "media", "pair", "status"]


def test_install_refuses_a_profile_that_isnt_there(host: HermesMachine) -> None:
    missing = host.yui("hermes", "install", "nobody", check=False)
    assert missing.returncode == 1
    assert missing.stderr.splitlines()[0] == (
        f"Error: there is no Hermes profile 'nobody' in {host.root}"
    )
    assert "Traceback" not in missing.stderr


def test_an_unpaired_profile_says_how_to_pair(host: HermesMachine) -> None:
    home = host.profile_home("coach")
    home.mkdir(parents=True)
    host.yui("hermes", "install", "coach", "--entry-point")
    assert not (home / "plugins" / "yui").exists()
    status = host.hermes("-p", "coach", "yui", "status", check=False)
    assert status.returncode == 3, status.stderr
    assert "Traceback" not in status.stderr
    assert status.stderr.startswith("Error: ")
