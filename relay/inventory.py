"""Every relay on this machine, and removing one for good: `yui relay list | destroy`.

A relay's PostgreSQL data may live outside its folder (under root, in ~postgres), so deleting
a `$YUI_HOME` used to orphan its cluster. The machine's register (relay/cluster.py) names every
cluster with the folder it served; this module reads it, sizes each cluster, and destroys one by
its folder or its key: gateway stopped, PostgreSQL stopped, its data and the relay folder gone.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg

from relay.cluster import (
    Cluster,
    cluster_by_key,
    cluster_for,
    folder_size,
    registered_keys,
    relay_key,
)
from state.errors import BadInput, YuiError

MARKERS = ("relay.json", "keys.json")  # what makes a folder a relay folder


@dataclass
class RelayEntry:
    """One relay on this machine, as `yui relay list` shows it."""

    key: str
    folder: str | None  # the relay folder, when the register knows it
    folder_exists: bool
    postgres: str  # running | stopped | absent
    postgres_data: str
    size: int  # bytes: the cluster, plus the relay folder when it exists

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Doomed:
    """What destroying a relay removes, counted before anything goes."""

    entry: RelayEntry
    messages: int | None  # None when the database couldn't be read
    media: int | None

    def summary(self) -> str:
        counts = (
            f"{self.messages} messages and {self.media} media objects"
            if self.messages is not None and self.media is not None
            else "its messages and media (not counted: the database didn't answer)"
        )
        where = self.entry.folder if self.entry.folder_exists else "its folder is already gone"
        return (
            f"relay {self.entry.key} ({where}): {counts}, "
            f"{_megabytes(self.entry.size)} on disk in {self.entry.postgres_data}"
            + (f" and {self.entry.folder}" if self.entry.folder_exists else "")
        )


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _entry(cluster: Cluster) -> RelayEntry:
    folder = cluster.folder
    exists = bool(folder and any((folder / m).exists() for m in MARKERS))
    postgres = "running" if cluster.running() else "stopped" if cluster.initialized() else "absent"
    size = cluster.size()
    if folder and exists and not cluster.base.is_relative_to(folder):
        size += folder_size(folder)
    elif folder and exists:
        size = folder_size(folder)
    return RelayEntry(
        key=cluster.key,
        folder=str(folder) if folder else None,
        folder_exists=exists,
        postgres=postgres,
        postgres_data=str(cluster.data),
        size=size,
    )


def relays() -> list[RelayEntry]:
    """Every relay cluster this user has on the machine, with those whose folder is gone."""
    return [_entry(cluster_by_key(key)) for key in registered_keys()]


def find(folder: Path | None, key: str | None) -> Cluster:
    """The cluster a relay folder or a key names; BadInput when there is none."""
    if key is not None:
        if key not in registered_keys():
            raise BadInput(
                f"no relay {key!r} on this machine", hint="`yui relay list` shows their keys"
            )
        return cluster_by_key(key)
    assert folder is not None
    cluster = cluster_for(folder)
    if not cluster.initialized() and not any((folder / m).exists() for m in MARKERS):
        raise BadInput(f"no relay in {folder}", hint="`yui relay list` shows every relay here")
    return cluster


def survey(cluster: Cluster) -> Doomed:
    """What destroying `cluster`'s relay removes, with its counts (PostgreSQL is started for
    the count when it is stopped, and left as it was)."""
    entry = _entry(cluster)
    messages = media = None
    if cluster.initialized():
        was_running = cluster.running()
        try:
            cluster.start()
            with psycopg.connect(cluster.conninfo(), connect_timeout=10) as conn:
                row = conn.execute(
                    "select (select count(*) from public.yui_messages),"
                    " (select count(*) from storage.objects)"
                ).fetchone()
            if row:
                messages, media = int(row[0]), int(row[1])
        except (YuiError, psycopg.Error):
            pass
        finally:
            if not was_running:
                cluster.stop()
    return Doomed(entry, messages, media)


def _command_lines() -> list[tuple[int, list[bytes]]]:
    """Every process's pid and arguments (those this user may read)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            found.append((int(proc.name), (proc / "cmdline").read_bytes().split(b"\0")))
        except OSError:
            continue
    return found


def _after(args: list[bytes], flag: bytes) -> Path | None:
    """The path an argument list gives after `flag`, if any."""
    for first, value in itertools.pairwise(args):
        if first == flag:
            return Path(value.decode(errors="replace"))
    return None


def gateways_serving(folder: Path) -> list[int]:
    """Gateway processes started for `folder` (`-m relay.gateway --dir FOLDER`), found by
    their command line, so one whose folder is gone is found too."""
    return [
        pid
        for pid, args in _command_lines()
        if b"relay.gateway" in args and _after(args, b"--dir") == folder
    ]


def postmasters_of(data: Path) -> list[int]:
    """PostgreSQL servers started on the data folder `data` (`postgres -D DATA`), found by
    their command line: one whose folder was deleted under it can't be stopped by pg_ctl."""
    return [
        pid
        for pid, args in _command_lines()
        if args and args[0].endswith(b"postgres") and _after(args, b"-D") == data
    ]


def destroy(
    cluster: Cluster,
    stop_gateway: Callable[[Path], object],
    stop_process: Callable[[int], object],
) -> RelayEntry:
    """Stop the relay's gateways (`stop_gateway(folder)`, then `stop_process(pid)` for any its
    folder no longer records) and PostgreSQL, then remove the cluster, its register entry
    and the relay folder. Returns what it was."""
    entry = _entry(cluster)
    folder = cluster.folder
    if folder is not None and entry.folder_exists:
        stop_gateway(folder)
    if folder is not None:  # a gateway whose folder was deleted under it still runs
        for pid in gateways_serving(folder):
            stop_process(pid)
    try:
        cluster.stop()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise YuiError(f"PostgreSQL of relay {cluster.key} would not stop: {exc}") from None
    for pid in postmasters_of(cluster.data):  # its data deleted under it: pg_ctl can't
        stop_process(pid)
    cluster.remove()
    if folder is not None and entry.folder_exists and relay_key(folder) == cluster.key:
        shutil.rmtree(folder, ignore_errors=True)
    return entry
