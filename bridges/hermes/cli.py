"""`hermes -p PROFILE yui …`: Hermes's side of the toolkit's `yui hermes` commands.

Hermes parses its own command line with argparse; everything after `yui` is handed as it is to
`yui hermes` (pair, add, status, media) in a process of its own, with the profile's home in
$HERMES_HOME, so the commands, their messages and their exit codes are the toolkit's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def setup(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("yui_args", nargs=argparse.REMAINDER, metavar="COMMAND ...")


def run(args: argparse.Namespace) -> None:
    """Run `yui hermes ARGS` and exit with its status (Hermes ignores a return value)."""
    given = list(getattr(args, "yui_args", None) or []) or ["--help"]
    sys.exit(subprocess.call([sys.executable, "-m", "yui_cli", "hermes", *given]))
