"""Per-worker throughput of a distributed run, checked on the rendered image: one line per
worker placed on the run's wall-clock seconds, plus the merged total, each visible in its
own colour."""

from __future__ import annotations

import dataclasses

import pytest
from httpbench import WorkerResult
from httpbench import _results as R
from httpbench import plot as PL
from test_plot_images import _pixels
from test_results import make_bench

pytest.importorskip("matplotlib")
np = pytest.importorskip("numpy")

T0 = 1_700_000_000_000_000_000
S = 1_000_000_000


def _distributed():
    a = WorkerResult(worker="tcp://10.0.0.1:4001", shard=0, host="gen-a", responses=1500,
                     successes=1500, duration_ns=5 * S, start_unix_ns=T0,
                     series_responses=(300, 300, 300, 300, 300))
    # started a second late: its series sits one second to the right in the merge
    b = WorkerResult(worker="tcp://10.0.0.2:4001", shard=1, host="gen-b", responses=400,
                     successes=400, duration_ns=4 * S, start_unix_ns=T0 + S,
                     series_responses=(100, 100, 100, 100))
    total = (300, 400, 400, 400, 400)
    return make_bench(responses=1900, successes=1900, status_counts={200: 1900},
                      error_counts={}, start_unix_ns=T0, end_unix_ns=T0 + 5 * S,
                      duration_ns=5 * S, series_responses=total, series_errors=(0,) * 5,
                      workers=(a, b))


def _rgb(line):
    from matplotlib.colors import to_rgb

    return to_rgb(line.get_color())


def _line_visible(fig, ax, line) -> None:
    """The middle of each segment of the line has the line's colour on the image."""
    img = _pixels(fig)
    height = img.shape[0]
    want = np.array(_rgb(line)) * 255
    pts = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))
    for (x0, y0), (x1, y1) in zip(pts[:-1], pts[1:], strict=True):
        x, y = int((x0 + x1) / 2), int(height - (y0 + y1) / 2)
        patch = img[y - 1:y + 2, x - 1:x + 2, :3].reshape(-1, 3).astype(float)
        assert np.abs(patch - want).max(axis=1).min() < 60, (line.get_label(), x, y)


@pytest.mark.slow
def test_one_line_per_worker_plus_the_total():
    r = _distributed()
    fig = PL.plot(r, "workers")
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert list(lines) == ["gen-a shard 0", "gen-b shard 1", "total"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == list(lines)
    # the late worker starts one interval later, as the merge placed it
    assert list(lines["gen-a shard 0"].get_xdata()) == [1, 2, 3, 4, 5]
    assert list(lines["gen-b shard 1"].get_xdata()) == [2, 3, 4, 5]
    assert list(lines["total"].get_ydata()) == [300, 400, 400, 400, 400]
    # the per-worker lines add up to the total at every second
    by_x: dict[float, float] = {}
    for lab in ("gen-a shard 0", "gen-b shard 1"):
        for x, y in zip(lines[lab].get_xdata(), lines[lab].get_ydata(), strict=True):
            by_x[x] = by_x.get(x, 0) + y
    assert [by_x[x] for x in lines["total"].get_xdata()] == list(lines["total"].get_ydata())
    lo, hi = ax.get_ylim()
    assert lo == 0 and hi > 400
    colors = {_rgb(ln) for ln in lines.values()}
    assert len(colors) == 3
    for ln in lines.values():
        _line_visible(fig, ax, ln)


def test_workers_kind_only_for_distributed_runs(tmp_path):
    with pytest.raises(ValueError, match="per-worker"):
        PL.plot(make_bench(), "workers")
    assert "workers" not in PL.applicable_kinds(make_bench())
    assert "workers" in PL.applicable_kinds(_distributed())
    rs = R.ResultSet().with_result("httpbench", "dist", 0, _distributed())
    fig = PL.plot_workers(rs)
    assert len(fig.axes[0].get_lines()) == 3


def test_a_lost_worker_is_named_in_the_legend():
    r = _distributed()
    lost = dataclasses.replace(r.workers[1], status="lost", series_responses=(100, 100))
    r2 = dataclasses.replace(r, workers=(r.workers[0], lost))
    labels = [ln.get_label() for ln in PL.plot_workers(r2).axes[0].get_lines()]
    assert "gen-b shard 1 (lost)" in labels
