"""Latency histograms for HdrHistogram tools: the ``.hgrm`` percentile text and
interval logs of V2-compressed histograms (HistogramLogAnalyzer, hdrh)."""

from __future__ import annotations

import base64
import math
import os
import struct
import zlib
from collections.abc import Sequence
from typing import Any

from ._hist import buckets, hist_count, hist_stat, percentile_spectrum
from ._rows import entries

__all__ = ["export_hdr_log", "export_histogram", "hdr_compressed", "hdr_hgrm",
           "hdr_interval_log"]


def hdr_hgrm(h: Any, unit_ns: float = 1e6, ticks_per_half: int = 5) -> str:
    """The classic ``.hgrm`` percentile distribution text (HdrHistogram's
    outputPercentileDistribution): columns Value, Percentile (0..1), TotalCount,
    1/(1-Percentile), then ``#[Mean ...]``/``#[Max ...]`` footers. Values are in
    ms by default (``unit_ns=1e6``), which the HdrHistogram plotter
    (plotFiles.html), hdr-plot and HistogramLogAnalyzer expect.
    """
    out = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}", ""]
    spec = percentile_spectrum(h, ticks_per_half)
    for v, p, cnt in spec:
        frac = p / 100.0
        if frac < 1.0:
            out.append(f"{v / unit_ns:12.3f} {frac:2.12f} {cnt:10d} {1 / (1 - frac):14.2f}")
        else:
            out.append(f"{v / unit_ns:12.3f} {frac:2.12f} {cnt:10d}")
    n = hist_count(h) if h is not None else 0
    mean = hist_stat(h, "mean") / unit_ns if n else 0.0
    sd = hist_stat(h, "stddev") / unit_ns if n else 0.0
    mx = hist_stat(h, "max") / unit_ns if n else 0.0
    out.append(f"#[Mean    = {mean:12.3f}, StdDeviation   = {sd:12.3f}]")
    out.append(f"#[Max     = {mx:12.3f}, Total count    = {n:12d}]")
    layout = _HdrLayout(int(getattr(h, "highest", 3_600_000_000_000)),
                        int(getattr(h, "sigfigs", 3)))
    out.append(f"#[Buckets = {layout.bucket_count:12d}, SubBuckets     = "
               f"{layout.sub_bucket_count:12d}]")
    return "\n".join(out) + "\n"


class _HdrLayout:
    """HdrHistogram's counts-array indexing (lowest discernible value 1)."""

    def __init__(self, highest: int, sigfigs: int) -> None:
        self.highest = max(highest, 2)
        self.sigfigs = sigfigs
        largest_single = 2 * 10**sigfigs
        mag = math.ceil(math.log2(largest_single))
        self.half_mag = max(mag, 1) - 1
        self.unit_mag = 0
        self.sub_bucket_count = 1 << (self.half_mag + 1)
        self.half = self.sub_bucket_count // 2
        self.mask = (self.sub_bucket_count - 1) << self.unit_mag
        smallest_untrackable = self.sub_bucket_count << self.unit_mag
        buckets = 1
        while smallest_untrackable <= self.highest:
            if smallest_untrackable > (1 << 62):
                buckets += 1
                break
            smallest_untrackable <<= 1
            buckets += 1
        self.bucket_count = buckets
        self.counts_len = (buckets + 1) * self.half
        self.lzc_base = 64 - self.unit_mag - self.half_mag - 1

    def index(self, v: int) -> int:
        v = max(0, min(int(v), self.highest))
        bucket = self.lzc_base - (64 - (v | self.mask).bit_length())
        sub = v >> (bucket + self.unit_mag)
        return ((bucket + 1) << self.half_mag) + (sub - self.half)


def _zigzag_leb128(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    for _ in range(8):
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z & 0xFF)  # 9th byte carries the last 8 bits
    return bytes(out)


_V2_ENCODING_COOKIE = 0x1C849303 | 0x10
_V2_COMPRESSION_COOKIE = 0x1C849304 | 0x10


def hdr_compressed(h: Any) -> bytes:
    """The histogram in HdrHistogram's V2 compressed binary encoding (what interval
    logs embed in base64): big-endian header, ZigZag-LEB128 counts with zero runs,
    deflated. Readable by every HdrHistogram implementation (Java, C, Python hdrh).
    """
    layout = _HdrLayout(int(getattr(h, "highest", 3_600_000_000_000)),
                        int(getattr(h, "sigfigs", 3)))
    counts: dict[int, int] = {}
    for lo, _hi, c in buckets(h):
        if c:
            i = layout.index(lo)
            counts[i] = counts.get(i, 0) + c
    payload = bytearray()
    if counts:
        limit = max(counts) + 1
        i = 0
        while i < limit:
            c = counts.get(i, 0)
            if c:
                payload += _zigzag_leb128(c)
                i += 1
            else:
                j = i
                while j < limit and not counts.get(j, 0):
                    j += 1
                payload += _zigzag_leb128(-(j - i))
                i = j
    header = struct.pack(">iiiiqqd", _V2_ENCODING_COOKIE, len(payload), 0, layout.sigfigs,
                         1, layout.highest, 1.0)
    data = zlib.compress(header + bytes(payload))
    return struct.pack(">ii", _V2_COMPRESSION_COOKIE, len(data)) + data


def hdr_interval_log(intervals: Sequence[tuple[Any, ...]],
                     start_unix_s: float | None = None, max_unit_ns: float = 1e6,
                     comment: str = "httpbench", tags: bool = False) -> str:
    """An HdrHistogram interval log (format 1.3, V2 compressed histograms).

    ``intervals``: (start_s, length_s, histogram[, name]) with start relative to
    ``start_unix_s``. Interval_Max is in ms (``max_unit_ns``) as jHiccup and
    HistogramLogProcessor expect; histogram values stay in ns. A ``name`` is
    written as a ``#[name]`` comment before its line, or with ``tags=True`` as
    the line's ``Tag=name,`` prefix (format 1.3 tags: the Java tools read them,
    python ``hdrh`` does not).
    """
    import time as _time

    out = [f"#[{comment}]", "#[Histogram log format version 1.3]"]
    if start_unix_s is not None:
        stamp = _time.strftime("%a %b %d %H:%M:%S UTC %Y", _time.gmtime(start_unix_s))
        out.append(f"#[StartTime: {start_unix_s:.3f} (seconds since epoch), {stamp}]")
        out.append(f"#[BaseTime: {start_unix_s:.3f} (seconds since epoch)]")
    out.append('"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"')
    for item in intervals:
        start, length, h = item[:3]
        name = item[3] if len(item) > 3 else None
        mx = hist_stat(h, "max") / max_unit_ns if hist_count(h) else 0.0
        b64 = base64.b64encode(hdr_compressed(h)).decode("ascii")
        prefix = ""
        if name:
            tag = "".join(ch if ch.isalnum() or ch in "-_./#:" else "_" for ch in str(name))
            if tags:
                prefix = f"Tag={tag},"
            else:
                out.append(f"#[{tag}]")
        out.append(f"{prefix}{start:.3f},{length:.3f},{mx:.3f},{b64}")
    return "\n".join(out) + "\n"


def export_hdr_log(obj: Any, path: str | os.PathLike[str], tags: bool = False,
                   which: str = "latency") -> int:
    """Write every record of ``obj`` (a record, list or ResultSet) as one interval
    of an HdrHistogram interval log, in run order, named ``client/scenario#repeat``
    (see :func:`hdr_interval_log`); returns the number of intervals written."""
    todo = [(c, sc, i, r) for c, sc, i, r in entries(obj)
               if getattr(r, which, None) is not None]
    if not todo:
        raise ValueError(f"nothing to export: no {which!r} histogram")
    t0 = min((r.start_unix_ns for *_, r in todo if r.start_unix_ns), default=0)
    intervals = []
    for c, sc, i, r in todo:
        dur = getattr(r, "duration_ns", None) or getattr(r, "wall_ns", 0)
        start = (r.start_unix_ns - t0) / 1e9 if r.start_unix_ns and t0 else 0.0
        name = c + (f"/{sc}" if sc else "") + f"#{i}"
        intervals.append((start, dur / 1e9, getattr(r, which), name))
    with open(os.fspath(path), "w", encoding="ascii") as f:
        f.write(hdr_interval_log(intervals, t0 / 1e9 if t0 else None, tags=tags))
    return len(intervals)


def export_histogram(h: Any, path: str | os.PathLike[str], fmt: str | None = None,
                     start_unix_ns: int = 0, duration_ns: int = 0) -> str:
    """Write a latency histogram for HdrHistogram tools; returns the format used.

    ``fmt``: "hlog" (interval log with one V2-compressed interval - HistogramLogAnalyzer,
    HistogramLogProcessor, hdrh.log) or "hgrm" (percentile distribution text -
    the HdrHistogram plotter, hdr-plot). Default from the file suffix (``.hgrm``
    -> hgrm, anything else -> hlog).

    ``h`` may also be a result record (``BenchResult``/``MeasureResult``): its
    latency histogram is written and, unless given, the interval log's start
    time and length are the run's own.
    """
    if getattr(h, "latency", None) is not None and hasattr(h, "start_unix_ns"):
        rec = h
        h = rec.latency
        start_unix_ns = start_unix_ns or int(rec.start_unix_ns or 0)
        duration_ns = duration_ns or int(getattr(rec, "duration_ns", 0)
                                         or getattr(rec, "wall_ns", 0) or 0)
    p = os.fspath(path)
    if fmt is None:
        fmt = "hgrm" if p.endswith(".hgrm") else "hlog"
    if fmt == "hgrm":
        text = hdr_hgrm(h)
    elif fmt == "hlog":
        start = start_unix_ns / 1e9 if start_unix_ns else None
        text = hdr_interval_log([(0.0, duration_ns / 1e9, h)], start)
    else:
        raise ValueError(f"unknown HdrHistogram export format {fmt!r}; use 'hlog' or 'hgrm'")
    with open(p, "w", encoding="ascii") as f:
        f.write(text)
    return fmt
