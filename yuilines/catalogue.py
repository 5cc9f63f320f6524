"""The preset catalogue as data (ref-specs §1.8, §1.9): names, groups, pictures and blocks.

Kept apart from the parser so a new preset is a new entry here plus, when its positionals mean
something, one reader in `props.py`.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


PRESETS = _words(
    """
    timer ask choose pick slide form camera mic say list table card image gallery video
    compare storyboard chart stat math step calc deck page plan flow project narrate
    timeline done now next sketch row after shapes shape diagram draw mock part map area pin
    route game loop drums keys chords tuner metronome query custom motion
    """
)

# Words that are lines of their own, not presets: they take no @id and are never patched.
CORE_WORDS = _words("save show forget menu clear close end talk doing visual theme put")

PICTURES = ("sketch", "shapes", "diagram", "mock", "draw", "map")
QUESTIONS = ("ask", "choose", "pick")

# Group heads and the presets that join them.
MEMBERS: dict[str, frozenset[str]] = {
    "deck": frozenset(("page", *QUESTIONS, *PICTURES, "math", "chart", "stat", "calc")),
    "plan": frozenset(("page", *QUESTIONS, "slide", "form", "mic", "camera", *PICTURES)),
    "narrate": _words("page compare image video card stat chart math storyboard gallery deck"),
    "timeline": frozenset(("done", "now", "next")),
    "sketch": frozenset(("row", "after")),
    "shapes": frozenset(("shape",)),
    "mock": frozenset(("part", "shape")),
    "map": frozenset(("area", "pin", "route")),
}

# Lines that leave an open group open (they draw nothing in it).
KEEP_GROUP = frozenset(("doing", "menu", "theme", "visual", "table", "put"))

# Block presets: lines after the head up to `end` are raw text, sent as one patch.
BLOCKS = frozenset(("diagram", "draw", "flow", "motion"))

# Presets a flow step may be (a plan's questions and its pages).
STEPS = frozenset(("page", *QUESTIONS, "slide", "form", "mic", "camera"))

ROW_KINDS = ("done", "now", "next")

URL_PREFIXES = ("http://", "https://", "/", "data:")

THEME_SETS = _words(
    """
    yui candy berry cherry coral sunset peach autumn honey lemon lime matcha forest mint
    teal sky ocean midnight lavender grape slate mono wizard coach zen studio night counsel
    """
)

# `theme app` is strict: these keys and values only (ref-specs §1.10).
THEME_APP_VALUES: dict[str, frozenset[str]] = {
    "radius": frozenset(("round", "soft", "square")),
    "font": frozenset(("rounded", "default", "serif", "mono")),
    "weight": frozenset(("regular", "bold", "heavy")),
    "motion": frozenset(("bouncy", "calm", "snappy")),
    "pace": frozenset(("slow", "even", "quick")),
    "ease": frozenset(("float", "spring", "sharp", "heavy")),
    "enter": frozenset(("rise", "pop", "slide", "drop", "fade")),
    "pulse": frozenset(("soft", "beat", "tick", "still")),
}
PAPERS = frozenset(("cream", "paper", "white", "mist", "sand", "blush"))

VISUAL_LOOKS = frozenset(("orb", "aurora", "waves", "grain", "bloom"))
VISUAL_REACTS = frozenset(("voice", "music", "mic", "off"))

MENU_BUCKETS = ("review", "backlog", "shortcut")
MENU_KEYS = ("sub", "say", "show", "url")

TABLE_TYPES = frozenset(("text", "number", "date", "bool"))

CHART_TYPES = ("line", "bar", "area", "scatter", "pie", "donut")
QUERY_VIEWS = frozenset(("table", "list", "chart", "stat", "send"))
SCALES = _words("major minor pentatonic chromatic blues dorian mixolydian lydian phrygian locrian")
INSTRUMENTS = frozenset(("guitar", "ukulele", "bass", "chromatic"))

# First words of a Mermaid diagram; `flow` takes only the flowchart ones.
MERMAID_FLOW = ("flowchart", "graph")
MERMAID_HEADERS = _words(
    """
    flowchart graph sequenceDiagram stateDiagram stateDiagram-v2 classDiagram erDiagram
    gantt pie journey gitGraph mindmap timeline quadrantChart requirementDiagram C4Context
    sankey-beta xychart-beta block-beta
    """
)
