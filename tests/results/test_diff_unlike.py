"""``diff`` says when runs are unlike: differing settings and each run's noise above the
verdicts, and a verdict resting on a disturbed or thin cell marked, not counted."""

import httpbench
import pytest
from httpbench import _cli
from httpbench import _results as R
from test_results import hist, make_measure


def _run(p50_us, *, repeat, slices, noisy=(), disturbed=0, calls=1000, **md):
    rs = R.ResultSet(metadata={"repeat": repeat, "slices": {"get-150b": slices},
                               "python": "3.11.7", "cpu_model": "Test CPU", "min_requests": 10,
                               "noise": {"get-150b": {"rounds": 2 * repeat, "reruns": disturbed,
                                                      "disturbed": disturbed,
                                                      "steal_median": 0.0, "steal_max": 0.0,
                                                      "other_median": 0.3 if disturbed else 0.0,
                                                      "other_max": 0.7 if disturbed else 0.0}},
                               **md})
    for rep in range(repeat):
        for c, us in p50_us.items():
            lat = hist([us * 1000 + rep * 100] * 200)
            rs = rs.with_result(c, "get-150b", rep, make_measure(c, seed=rep, latency=lat,
                                                                 calls=calls))
    for c in noisy:
        rs = rs.with_note(R.Note("noisy", "round 2: disturbed: other processes 70%", c,
                                 "get-150b", 1))
    return rs


def test_unlike_runs_are_named_above_the_verdicts_and_disturbed_cells_not_counted():
    quiet = _run({"pycurl": 71, "requests": 400}, repeat=5, slices=8)
    noisy = _run({"pycurl": 103, "requests": 480}, repeat=3, slices=2, noisy=["pycurl"],
                 disturbed=3)
    cmp = httpbench.diff(quiet, noisy, metrics=["p50_ns"])
    assert "settings differ: repeats: 5 vs 3" in cmp.notes
    assert "settings differ: slices: 8 vs 2" in cmp.notes
    assert any(n.startswith("current get-150b: machine noise") and
               "3 round(s) still disturbed" in n for n in cmp.notes)
    assert "current notes: noisy" in cmp.notes
    py, rq = cmp.get("pycurl", "get-150b", "p50_ns"), cmp.get("requests", "get-150b", "p50_ns")
    assert py.verdict == "slower" and py.caution == "disturbed in current"
    assert py.shown_verdict == "slower? (disturbed in current: not counted)"
    assert rq.verdict == "slower" and rq.caution == ""
    assert cmp.regressions == [rq] and cmp.marked == [py]
    text = cmp.format()
    assert text.index("1 regressions") < text.index("Unlike runs") < text.index("client ")
    assert "1 more marked '?' and not counted" in text
    assert cmp.to_dict()["changes"][0]["caution"] == "disturbed in current"


def test_like_runs_have_no_notes():
    a = _run({"requests": 400}, repeat=5, slices=8)
    b = _run({"requests": 480}, repeat=5, slices=8)
    cmp = httpbench.diff(a, b, metrics=["p50_ns"])
    assert cmp.notes == ()
    assert "Unlike runs" not in cmp.format()
    assert len(cmp.regressions) == 1


def test_thin_cells_are_marked():
    a = _run({"requests": 400}, repeat=5, slices=8)
    b = _run({"requests": 480}, repeat=5, slices=8, calls=4)  # rounds of 4 requests
    (ch,) = httpbench.diff(a, b, metrics=["p50_ns"]).changes
    assert ch.caution == "thin in current" and ch.significant and not ch.counted


def test_newer_settings_count_when_both_runs_record_them_and_are_tolerated_when_absent():
    place = {"get-150b": {"mode": "same", "server_cpus": [0], "client_cpus": [0]}}
    split = {"get-150b": {"mode": "split", "server_cpus": [0], "client_cpus": [1]}}
    a = _run({"requests": 400}, repeat=5, slices=8, placement=place,
             speed_index={"median": 1.0, "min": 0.98, "max": 1.02, "rounds": 5},
             wakeup_ns={"same_cpu": 4000, "cross_cpu": 30000})
    b = _run({"requests": 400}, repeat=5, slices=8, placement=split,
             speed_index={"median": 1.3, "min": 1.28, "max": 1.33, "rounds": 5},
             wakeup_ns={"same_cpu": 4000, "cross_cpu": 30000})
    notes = httpbench.diff(a, b).notes
    assert ("settings differ: placement: get-150b same (server [0], client [0]) vs "
            "get-150b split (server [0], client [1])") in notes
    assert "settings differ: machine-speed index: 1 vs 1.3" in notes
    assert not any("wake-up" in n for n in notes)  # equal
    old = _run({"requests": 400}, repeat=5, slices=8)  # an older result: none of them
    assert httpbench.diff(old, b).notes == ()


def test_diff_cli_prints_the_notes_first(tmp_path, capsys):
    _run({"requests": 400}, repeat=5, slices=8).save(tmp_path / "a.json")
    _run({"requests": 480}, repeat=3, slices=2, noisy=["requests"],
         disturbed=1).save(tmp_path / "b.json")
    assert _cli.main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                      "--fail-on-regression"]) == 0  # the one slower cell is disturbed
    out = capsys.readouterr().out
    # the tally first, then the machine, then what makes the runs unlike
    assert out.startswith("0 regressions, 0 improvements; 3 more marked '?'")
    assert ("\nUnlike runs: read the verdicts with these in mind\n"
            "  * settings differ: repeats: 5 vs 3\n"
            "  * settings differ: slices: 8 vs 2\n") in out
    assert "\nmachine: speed index" in out
    assert "slower? (disturbed in current: not counted)" in out


@pytest.mark.slow
def test_diff_html_shows_the_notes_and_marks(tmp_path):
    pytest.importorskip("matplotlib")
    from httpbench import report

    a = _run({"requests": 400}, repeat=5, slices=8)
    b = _run({"requests": 480}, repeat=3, slices=2, noisy=["requests"], disturbed=1)
    page = report.html_diff(a, b, httpbench.diff(a, b, metrics=["p50_ns"]), plots=False)
    assert "Unlike runs: read the verdicts with these in mind" in page
    assert ('<span class="verdict-marked">slower? (disturbed in current: not counted)</span>'
            in page)
