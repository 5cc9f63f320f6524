"""Hermes agents in Yui: a Hermes platform plug-in that runs this toolkit's engine.

`plugin.register` is what Hermes loads (from the `hermes_agent.plugins` entry point, or from the
folder `yui hermes install` links into a profile); everything Hermes-specific imports Hermes
only there and in `adapter`, so the rest of the toolkit never needs it.
"""
