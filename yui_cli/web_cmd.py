"""`yui app web`: the person's side in a browser, served by the relay at /app/."""

from __future__ import annotations

import webbrowser

import click

from yui_cli.options import as_option, json_option
from yui_cli.output import emit


@click.command(name="web")
@as_option
@click.option("--open", "open_", is_flag=True, help="Open the link in this machine's browser.")
@json_option
def web(as_: str | None, open_: bool, json_: bool) -> None:
    """Print a link that opens the web app signed in as this person.

    \b
    The link works once, within ten minutes, on any browser that reaches the relay; keep it to
    yourself as you would a password. Elsewhere, sign in on the page (RELAY/app/) with the
    e-mail address and password of `yui app set-password`.
    """
    from people.person import PersonApp
    from people.web import opener, signin_link

    app = PersonApp(as_)
    link = signin_link(app)
    opened = open_ and webbrowser.open(opener(link).as_uri())
    emit({"name": app.record.name, "link": link, "opened": bool(opened)}, link, json_=json_)
    if open_ and not opened:
        click.echo("no browser could be opened here: open the link yourself", err=True)
