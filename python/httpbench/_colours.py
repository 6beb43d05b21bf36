"""One colour per client, the same in every figure, run and surface.

A client's colour comes from its name alone, never from its place in a run: the
built-in clients have fixed slots (an ``-async`` variant the lighter shade of its
library's colour), any other name is hashed into the same palette. So ``native``
is the same blue in the terminal's PNGs, the HTML report and a notebook, whichever
other clients ran beside it.
"""

from __future__ import annotations

import zlib

__all__ = ["PALETTE", "client_colour"]

# (dark, light) pairs: matplotlib's tab20 and tab20b hues, then three more
PALETTE: tuple[tuple[str, str], ...] = (
    ("#1f77b4", "#aec7e8"),  # blue
    ("#ff7f0e", "#ffbb78"),  # orange
    ("#2ca02c", "#98df8a"),  # green
    ("#d62728", "#ff9896"),  # red
    ("#9467bd", "#c5b0d5"),  # purple
    ("#8c564b", "#c49c94"),  # brown
    ("#e377c2", "#f7b6d2"),  # pink
    ("#7f7f7f", "#c7c7c7"),  # grey
    ("#bcbd22", "#dbdb8d"),  # olive
    ("#17becf", "#9edae5"),  # cyan
    ("#393b79", "#6b6ecf"),  # navy
    ("#637939", "#b5cf6b"),  # moss
    ("#8c6d31", "#e7ba52"),  # gold
    ("#843c39", "#d6616b"),  # maroon
    ("#7b4173", "#ce6dbd"),  # plum
    ("#00441b", "#41ab5d"),  # forest
    ("#3f007d", "#807dba"),  # indigo
    ("#252525", "#969696"),  # black
)

# the built-in clients' libraries, in a fixed order: each its own hue
_FAMILIES = ("native", "pycurl", "requests", "httpx", "urllib3", "http.client", "aiohttp",
             "curl", "niquests", "curl_cffi", "pyreqwest", "wreq", "primp", "httpx2", "httpxyz",
             "aiosonic", "aioquic", "command")


def _family(name: str) -> tuple[str, bool]:
    """('httpx', True) for 'httpx-async'."""
    if name.endswith("-async"):
        return name[: -len("-async")], True
    return name, False


def client_colour(name: str) -> str:
    """The client's colour as ``#rrggbb``: fixed for the built-in clients, a stable hash
    into the same palette for any other name (a suffix such as ' (corrected)' or
    ' / scenario' is ignored)."""
    base = name.split(" (", 1)[0].split(" / ", 1)[0].strip()
    fam, light = _family(base)
    if fam in _FAMILIES:
        return PALETTE[_FAMILIES.index(fam)][1 if light else 0]
    h = zlib.crc32(base.encode("utf-8"))
    return PALETTE[h % len(PALETTE)][(h >> 8) & 1]
