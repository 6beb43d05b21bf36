"""History trends as matplotlib figures (built without pyplot, like httpbench.plot's):
each series' values run by run, its CI band, the segment means between change points,
the change points marked, and runs whose speed index moved drawn as open markers."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_PANELS", "html_page", "plot_series"]

MAX_PANELS = 12  # series drawn in one figure; more are left out, and the title says so


def plot_series(series: Sequence[Any], findings: Mapping[str, Sequence[Any]], *,
                path: str | None = None, title: str = "") -> Any:
    """One panel per series (at most :data:`MAX_PANELS`); returns the Figure."""
    from .plot import figure_class  # a Figure that shows itself in Jupyter, no pyplot

    shown = list(series)[:MAX_PANELS]
    n = max(1, len(shown))
    fig = figure_class()(figsize=(9, 2.6 * n))
    axes = fig.subplots(n, 1, squeeze=False)
    for ax, s in zip(axes[:, 0], shown, strict=False):
        xs = list(range(len(s.points)))
        ys = [p.value for p in s.points]
        lo = [p.ci_low if p.ci_low is not None else math.nan for p in s.points]
        hi = [p.ci_high if p.ci_high is not None else math.nan for p in s.points]
        if any(not math.isnan(v) for v in lo):
            ax.fill_between(xs, lo, hi, alpha=0.25, color="tab:blue", linewidth=0,
                            label="95% CI")
        ax.plot(xs, ys, "-", color="tab:blue", linewidth=1)
        moved = [i for i, p in enumerate(s.points)
                 if p.speed_change is not None and abs(p.speed_change) > 0.03]
        steady = [i for i in xs if i not in set(moved)]
        ax.plot(steady, [ys[i] for i in steady], "o", color="tab:blue", markersize=3)
        if moved:
            ax.plot(moved, [ys[i] for i in moved], "o", mfc="none", color="tab:orange",
                    markersize=6, label="speed index moved")
        marks = list(findings.get(s.name, ()))
        edges = [0] + [f.change_point.index for f in marks] + [len(ys)]
        for a, b in zip(edges, edges[1:], strict=False):
            if b > a:
                mean = sum(ys[a:b]) / (b - a)
                ax.hlines(mean, a - 0.4, b - 0.6, colors="black", linewidth=1.2)
        for f in marks:
            x = f.change_point.index - 0.5
            color = "tab:red" if f.worse else "tab:green"
            ax.axvline(x, color=color, linestyle="--", linewidth=1.2)
            ax.annotate(f"{f.change_point.change * 100:+.1f}% at {f.after.where}\n"
                        f"p={f.change_point.pvalue:.1g}", (x, max(ys)), fontsize=7,
                        color=color, ha="left", va="top")
        ticks = xs if len(xs) <= 20 else xs[::max(1, len(xs) // 20)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([s.points[i].where for i in ticks], rotation=60, fontsize=6)
        ax.set_title(s.name, fontsize=8)
        ax.set_ylabel(s.metric, fontsize=7)
        if any(not math.isnan(v) for v in lo) or moved:
            ax.legend(fontsize=6, loc="lower right")
    if not shown:
        axes[0, 0].text(0.5, 0.5, "no series", ha="center", va="center")
    head = title + (f" ({len(shown)} of {len(series)} series)" if len(series) > len(shown)
                    else "")
    fig.suptitle(head, fontsize=9)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
    return fig


def html_page(store: str, pngs: Sequence[str]) -> str:
    """A self-contained HTML page with the history plots embedded."""
    imgs = []
    for p in pngs:
        with open(p, "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
        imgs.append(f'<figure><img alt="{html.escape(p)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(p)}</figcaption></figure>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>httpbench history</title>"
            "<style>body{font-family:sans-serif;margin:2em}img{max-width:100%}</style></head>"
            f"<body><h1>History: {html.escape(store)}</h1>"
            "<p>Each panel: one series run by run, the 95% CI band, the mean of each segment "
            "between change points (black), change points for the worse (red) and the better "
            "(green), runs whose speed index moved (open markers).</p>"
            + "".join(imgs) + "</body></html>\n")


def write_history_page(history: Any, rs: Any, out_dir: str,
                       metric: str = "cpu_ns_per_request") -> str | None:
    """``history.png`` and ``history.html`` in ``out_dir``: the trend of ``metric`` of every
    (client, scenario) of the compare run ``rs`` on its machine, change points marked
    (at most :data:`MAX_PANELS` series); the page's path, or None when none has 2 runs."""
    import os

    from ._changepoints import detect
    from ._history import findings_of
    from ._historyrun import fingerprint

    fp = fingerprint(rs.metadata)["fingerprint"]
    found = []
    for sc in rs.scenarios:
        for client in rs.clients:
            if history.store.series(subject=client, scenario=sc, metric=metric, machine=fp):
                found += [s for s in history.series(client, sc, metric, fp, last=200)
                          if len(s) >= 2]
    if not found:
        return None
    marks = {s.name: findings_of(s, detect(s.values)) for s in found}
    png = os.path.join(out_dir, "history.png")
    plot_series(found, marks, path=png, title=f"{metric} in {history.name}")
    page = os.path.join(out_dir, "history.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(html_page(history.name, [png]))
    return page
