"""The relay's people who aren't hosts: the person (`yui app`) and its operator."""
