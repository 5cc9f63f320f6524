"""`make bench`: the DESIGN §6 targets, measured against the poll-only reference in one run."""
