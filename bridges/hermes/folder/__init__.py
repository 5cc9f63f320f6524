"""The Yui platform as a folder plug-in: `<profile home>/plugins/yui` links here."""

from bridges.hermes.plugin import register

__all__ = ["register"]
