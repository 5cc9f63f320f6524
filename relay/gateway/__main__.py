"""`python -m relay.gateway --dir RELAY_DIR --port P`: one gateway process (what `yui relay up`
starts in the background)."""

from relay.server import main

main()
