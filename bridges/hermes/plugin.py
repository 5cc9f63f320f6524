"""What Hermes loads: `register(ctx)` adds the Yui platform and `hermes yui …`.

The platform's hint is the channel guide; its home channel is the profile's own thread, so
`hermes send --to yui` and cron's `--deliver yui` target it, and both go out through the
standalone sender (they never reach a running adapter). Hermes's allowlist doesn't apply:
inbound is authorized upstream, by the relay.
"""

from __future__ import annotations

import os
from typing import Any

from bridges.client.rows import MAX_BODY
from bridges.hermes import paths

HOME_CHANNEL_ENV = "YUI_HOME_CHANNEL"


def register(ctx: Any) -> None:
    """Hermes's entry point for the plug-in (folder or `hermes_agent.plugins`)."""
    from bridges.hermes import cli
    from bridges.hermes.sender import standalone_send

    profile = paths.profile_name()
    os.environ.setdefault(HOME_CHANNEL_ENV, profile)
    ctx.register_platform(
        name="yui",
        label="Yui",
        adapter_factory=_adapter,
        check_fn=lambda: True,
        is_connected=lambda config: paths.state_path().is_file(),
        install_hint=f"pair first: hermes -p {profile} yui pair CODE",
        env_enablement_fn=lambda: {
            "home_channel": {"chat_id": os.environ[HOME_CHANNEL_ENV], "name": "Yui"}
        },
        cron_deliver_env_var=HOME_CHANNEL_ENV,
        standalone_sender_fn=standalone_send,
        max_message_length=MAX_BODY,
        emoji="💬",
        pii_safe=True,
        allow_update_command=False,
    )
    ctx.register_cli_command(
        name="yui",
        help="Talk in Yui: pair, add, status, media",
        setup_fn=cli.setup,
        handler_fn=cli.run,
        description="Pair this profile with its Yui agent (pair CODE, or add when the computer "
        "is paired), see it (status), send a picture or video (media FILE|URL [caption]); "
        "hermes yui COMMAND --help says more.",
    )


def _adapter(config: Any) -> Any:
    from bridges.hermes.adapter import YuiAdapter

    return YuiAdapter(config)
