"""The capability report: which sections of Controls a bridge serves, told to the relay once
for each agent it serves (through yui-connect's `controls` action), so the app knows what to
show; a bridge that serves none clears a report an earlier run of it sent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from bridges.client.host import HostSession
from bridges.controls.provider import ControlsProvider, report_of
from bridges.controls.store import ControlsState
from bridges.retry import Backoff, retry_loop
from state.errors import YuiError

log = logging.getLogger("yui.controls")


class ControlsReporter:
    """Tells the relay which sections the bridge serves, once for each agent it serves (new
    ones too, as the engine learns them), and clears a report an earlier run sent when it now
    serves none. Runs beside the engine on the bridge's own session; costs no call while no
    agent is new. The provider's `load_report()` (the webhook's asks its author) comes first,
    retried while it raises `Unreachable`."""

    def __init__(
        self,
        session: HostSession,
        provider: ControlsProvider | None,
        state: ControlsState,
        emit: Callable[..., None],
        every: float = 2.0,
    ) -> None:
        self.session = session
        self.provider = provider
        self.state = state
        self.emit = emit
        self.every = every
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._done: set[str] = set()
        self._report: dict[str, Any] | None = None
        self._loaded = False
        self._thread = threading.Thread(target=self._run, name="controls", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def wake(self) -> None:
        """The engine learned its agents: report now rather than at the next look."""
        self._wake.set()

    def _run(self) -> None:
        try:
            retry_loop(
                self._pass,
                stop=self._stop,
                wake=self._wake,
                backoff=Backoff(first=self.every),
                on_retry=lambda exc, wait: log.info("Controls report waits %.0f s: %s", wait, exc),
            )
        except YuiError as exc:  # revoked (the engine stops too), or a relay without Controls
            log.warning("the relay didn't take the Controls report: %s", exc.message)

    def _pass(self) -> float:
        self.report_new()
        return self.every

    def report_new(self) -> None:
        """Report to the relay for each served agent not yet done."""
        if not self._loaded:
            if self.provider is not None:
                self.provider.load_report()
            self._report = report_of(self.provider)
            self._loaded = True
        connector = self.session.connector.get("id")
        for agent in list(self.session.agents.values()):
            if not agent.ref or agent.ref in self._done:
                continue
            key = f"{connector}:{agent.ref}"
            if self._report is None and not self.state.reported(key):
                self._done.add(agent.ref)
                continue
            self.session.connect("controls", remote_ref=agent.ref, controls=self._report)
            self.state.reported(key, self._report is not None)
            self._done.add(agent.ref)
            sections = sorted((self._report or {}).get("sections", {}))
            self.emit("controls", agent=agent.handle, sections=sections)
