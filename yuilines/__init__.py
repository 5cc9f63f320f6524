"""Yui Lines: the screens agents draw inside ```yui fences, read, gated and checked."""
