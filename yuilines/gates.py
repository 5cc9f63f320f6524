"""The first app build that draws each preset (ref-client §4.6, relay spec "Min builds").

Builds are commit counts of the app repo; `yui-connect session` gives the oldest build among
the person's phones, or null (older than every row here). A new preset adds one row: words and
pages for an older phone come from its props, so nothing else needs to change.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_BUILD_YET = 1_000_000  # taught to the spec, not yet to any app build

# Gated presets an older build still gets as something else, never named to the agent: a flow
# with a chart becomes a plan of its steps.
MADE_OVER = frozenset(("flow",))

# Shape kinds (marks) drawn from this build on; below it such a shape line is dropped.
MARKS_BUILD = 492
MARK_KINDS = frozenset(("venn", "contour", "region", "doodle", "tap", "swipe"))

# Older builds end a deck at these pictures, so on them the pictures are lifted out of decks.
DECK_PICTURES_BUILD = 158
DECK_PICTURES = frozenset(("shapes", "math", "chart", "stat", "calc"))


@dataclass(frozen=True, slots=True)
class Gate:
    """`build` is the first that draws it; a `quiet` line draws nothing in the chat anyway, so
    on an older build it is dropped and never named to the agent."""

    build: int
    quiet: bool = False


# One row per preset or core line (members of a group have rows of their own).
MIN_BUILD: dict[str, Gate] = {
    "timeline": Gate(69),
    "done": Gate(69),
    "now": Gate(69),
    "next": Gate(69),
    "game": Gate(71),
    "sketch": Gate(104),
    "row": Gate(104),
    "after": Gate(104),
    "menu": Gate(115, quiet=True),
    "shapes": Gate(131),
    "shape": Gate(131),
    "loop": Gate(175),
    "drums": Gate(175),
    "keys": Gate(177),
    "chords": Gate(177),
    "tuner": Gate(205),
    "metronome": Gate(205),
    "map": Gate(219),
    "area": Gate(219),
    "pin": Gate(219),
    "route": Gate(219),
    "flow": Gate(414),
    "table create": Gate(450),
    "put": Gate(450),
    "query": Gate(450),
    "draw": Gate(466),
    "diagram": Gate(NO_BUILD_YET),
    "mock": Gate(NO_BUILD_YET),
    "part": Gate(NO_BUILD_YET),
    "motion": Gate(NO_BUILD_YET),
}


def draws(name: str, build: int | None) -> bool:
    """Whether an app build draws this preset (None: an unknown build, older than all)."""
    gate = MIN_BUILD.get(name)
    return gate is None or (build is not None and build >= gate.build)
