"""The engine: one turn at a time per agent, every message once, in order, across crashes."""
