"""The relay client: the one owner of the wire contract, and a host's session."""
