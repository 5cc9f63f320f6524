"""Controls: the person reads and changes what their agent is made of, with no chat turn."""
