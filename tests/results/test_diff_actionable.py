"""A diff you can act on: two runs of one command show no change outside their noise,
environment differences (the build's features, a client's transport stack, the
machine's speed) are named as the cause, the tally comes first and the rest is one
line unless asked for."""

import random

import httpbench
import pytest
from httpbench import _cli
from httpbench import _results as R
from httpbench._stack import stack_differences, transport_stack
from test_results import hist, make_measure

_CLIENTS = {"native": 9, "pycurl": 16, "requests": 440, "httpx": 270, "urllib3": 130}
_SCENARIOS = ("get-150b", "post-300k-file", "https-get-150b")


def _same_command(seed, *, speed=54_000.0, wakeup=28_400, rss=30 << 20, features=None,
                  stacks=None, cpu_scale=1.0, scenarios=_SCENARIOS, slices=None, wall_scale=1.0):
    """One run of `compare --quick` as the machine gives it: every figure of every round
    moves by a few percent at random around the same truth."""
    rng = random.Random(seed)
    md = {"repeat": 3, "speed_index": {"median": speed}, "wakeup_ns": {"same_cpu": wakeup},
          "slices": slices or {s: 2 for s in scenarios}, "python": "3.11.7",
          "scenarios": {s: {"concurrency": 1} for s in scenarios}}
    if features is not None:
        md["build_features"] = features
    if stacks is not None:
        md["client_stacks"] = stacks
    rs = R.ResultSet(metadata=md)
    for sc in scenarios:
        for rep in range(3):
            for c, us in _CLIENTS.items():
                j = lambda: rng.gauss(1.0, 0.04)  # noqa: E731 - one draw per figure
                # a slower client is slower in every timing figure
                lat = hist(int(us * 1000 * j() * rng.uniform(0.95, 1.05) * cpu_scale)
                           for _ in range(100))
                rs = rs.with_result(c, sc, rep, make_measure(
                    c, seed=rng.randrange(1 << 30), latency=lat, calls=1000,
                    wall_ns=int(us * 1.3e6 * j() * cpu_scale * wall_scale),
                    cpu_user_ns=int(us * 1e6 * j() * cpu_scale),
                    cpu_sys_ns=0, peak_rss_bytes=int(rss * rng.uniform(0.995, 1.005))))
    return rs


def test_two_runs_of_one_command_show_no_regression_outside_the_noise():
    for k in range(5):
        cmp = httpbench.diff(_same_command(2 * k), _same_command(2 * k + 1))
        assert cmp.regressions == [] and cmp.improvements == [], (k, cmp.summary)
        assert not [n for n in cmp.notes if n.startswith("settings differ")], cmp.notes


def test_a_real_change_is_still_found():
    cmp = httpbench.diff(_same_command(1), _same_command(2, cpu_scale=1.3))
    slower = {(c.client, c.scenario) for c in cmp.regressions if c.metric == "cpu_ns_per_request"}
    assert len(slower) == len(_CLIENTS) * len(_SCENARIOS)


def test_a_req_s_change_no_latency_or_cpu_shows_is_the_machines():
    # one request at a time: the calls took as long, the run 40% longer around them
    cmp = httpbench.diff(_same_command(1), _same_command(2, wall_scale=1.4))
    rps = [c for c in cmp.changes if c.metric == "rps" and c.significant]
    assert rps and all(c.caution.startswith("req/s alone moved") for c in rps)
    assert cmp.regressions == []


def test_different_build_features_are_named_and_explain_peak_rss():
    full = {"http2-server": True, "http3-server": True, "tls": True}
    bare = {"http2-server": False, "http3-server": False, "tls": True}
    cmp = httpbench.diff(_same_command(1, features=full, rss=40 << 20),
                         _same_command(2, features=bare, rss=30 << 20))
    assert ("settings differ: build features: http2-server yes vs no, http3-server yes vs no"
            in cmp.notes)
    rss = [c for c in cmp.changes if c.metric == "peak_rss_bytes"]
    assert rss and all(c.verdict == "better" and "the builds differ" in c.caution for c in rss)
    assert not [c for c in cmp.improvements if c.metric == "peak_rss_bytes"]


def test_a_replaced_transport_package_is_named_as_the_cause():
    plain = {"packages": {"requests": "2.34.2", "urllib3": "2.8.0"}, "replaced": {}}
    future = {"packages": {"requests": "2.34.2", "urllib3": "2.8.0",
                           "urllib3-future": "2.12.9"},
              "replaced": {"urllib3": ["urllib3 2.8.0", "urllib3-future 2.12.9"]}}
    assert stack_differences(plain, future) == [
        "urllib3-future 2.12.9 only in current",
        "urllib3/ installed by urllib3 2.8.0 and urllib3-future 2.12.9 in current "
        "(one replaced the other's files)"]
    base = _same_command(1, stacks={"requests": plain})
    cur = _same_command(2, stacks={"requests": future}, cpu_scale=1.3)
    cmp = httpbench.diff(base, cur)
    assert any(n.startswith("transport stack of requests differs: urllib3-future 2.12.9")
               for n in cmp.notes)
    req = [c for c in cmp.changes if c.client == "requests" and c.significant]
    assert req and all("its transport stack differs" in c.caution for c in req)
    assert not [c for c in cmp.regressions if c.client == "requests"]
    assert [c for c in cmp.regressions if c.client == "httpx"]  # the others still count


def test_transport_stack_of_an_installed_client_lists_its_requirements():
    import importlib.metadata

    st = transport_stack("requests")
    assert st["packages"]["requests"] == importlib.metadata.version("requests")
    assert "urllib3" in st["packages"] and "idna" in st["packages"]
    assert transport_stack("no-such-distribution-here") == {"packages": {}, "replaced": {}}


def test_a_cpu_change_inside_the_machines_speed_change_is_not_counted():
    cmp = httpbench.diff(_same_command(1), _same_command(2, speed=54_000 * 1.30, cpu_scale=1.3))
    cpu = [c for c in cmp.changes if c.metric == "cpu_ns_per_request" and c.significant]
    assert cpu and all("within the machine's speed change (+30.0%)" in c.caution for c in cpu)
    assert all(abs(c.normalised) < 0.1 for c in cpu)
    assert not [c for c in cmp.regressions if c.metric == "cpu_ns_per_request"]
    assert cmp.machine.startswith("machine: speed index 54.0 -> 70.2 µs per unit of work "
                                  "(+30.0%; + is slower); machine 30% slower than the "
                                  "baseline's")
    assert cmp.machine.endswith("; wake-up same-cpu 28.4 -> 28.4 µs")


def test_settings_are_compared_on_shared_scenarios_and_wakeup_with_a_threshold():
    base = _same_command(1, slices={"get-150b": 2, "download-7m": 8, "post-300k-file": 2,
                                    "https-get-150b": 2})
    cur = _same_command(2, wakeup=29_000)
    notes = httpbench.diff(base, cur).notes
    assert not [n for n in notes if "slices" in n or "wake-up" in n], notes
    moved = httpbench.diff(base, _same_command(2, wakeup=40_000)).notes
    assert "settings differ: wake-up cost: same-cpu 28.4 µs vs same-cpu 40.0 µs" in moved


def test_cli_prints_the_tally_first_and_all_rows_only_when_asked(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _same_command(1).save(a)
    _same_command(2, cpu_scale=1.3).save(b)
    assert _cli.main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    # 4 timing metrics x 15 cells; p99.9 of rounds of 1,000 requests is marked, not counted
    assert out.startswith("60 regressions, 0 improvements; 15 more marked")
    assert out.splitlines()[2].startswith("machine: speed index 54.0 -> 54.0")
    assert "no significant change  " not in out  # the rest is one line
    assert "more compared metrics:" in out and "(--all lists them)" in out
    assert _cli.main(["diff", str(a), str(b), "--all"]) == 0
    full = capsys.readouterr().out
    assert full.count("no significant change") == 75  # every compared metric listed


@pytest.mark.slow
def test_diff_of_real_runs_of_one_command_finds_no_regression():
    """The same compare, run again on the same build, five times: diff counts no change
    (a cell disturbed by another process is marked, not counted)."""
    def once():
        return httpbench.compare(clients=["native", "http.client"], scenarios=["get-150b"],
                                 repeat=3, n=300, out=None, plots=False)

    runs = [once() for _ in range(6)]
    for a, b in zip(runs, runs[1:], strict=False):
        cmp = httpbench.diff(a, b)
        assert cmp.regressions == [], cmp.format()
        assert not [n for n in cmp.notes if n.startswith("settings differ: build")]
        assert not [n for n in cmp.notes if n.startswith("transport stack")]
        assert cmp.machine.startswith("machine: speed index ")


def test_a_tail_percentile_of_short_rounds_is_no_verdict():
    base, cur = _same_command(1), _same_command(2)
    # the current run's p99 tail: one slow request in each round of 1000
    slow = R.ResultSet(metadata=cur.metadata)
    for (c, sc, i), r in cur.results.items():
        if c == "native":
            lat = hist([9_000] * 995 + [5_000_000] * 5)
            r = make_measure(c, seed=i, latency=lat, calls=1000, wall_ns=r.wall_ns,
                             cpu_user_ns=r.cpu_user_ns, cpu_sys_ns=0,
                             peak_rss_bytes=r.peak_rss_bytes)
        slow = slow.with_result(c, sc, i, r)
    cmp = httpbench.diff(base, slow, metrics=["p999_ns"])
    tail = [c for c in cmp.changes if c.client == "native" and c.significant]
    assert tail and all("p99.9 of rounds of 1,000 requests" in c.caution for c in tail)
    assert cmp.regressions == []


def test_jupyter_shows_the_tally_first_and_folds_the_rest():
    cmp = httpbench.diff(_same_command(1), _same_command(2, cpu_scale=1.3))
    page = cmp._repr_mimebundle_()["text/html"]
    assert page.index("60 regressions") < page.index("machine: speed index") < page.index("<table")
    folded = page[page.index("<details>"):]
    assert "75 more compared metrics" in folded and "no significant change" in folded
    assert "no significant change" not in page[:page.index("<details>")]


def test_a_timing_step_within_run_to_run_noise_needs_a_history():
    """Runs whose repeats agree tightly still differ from run to run by 5-7 % on a shared
    VM: by default a pair of runs calls no timing change under 8 % a verdict, and says so;
    with run_noise=0 the statistics alone call the smaller ones too."""
    base = _same_command(1)
    cur = _same_command(2, cpu_scale=1.06)
    cmp = httpbench.diff(base, cur, metrics=["cpu_ns_per_request"])
    assert "timings within 8% run-to-run noise" in cmp.summary
    assert all(abs(c.change) >= 0.08 for c in cmp.changes if c.significant)
    strict = httpbench.diff(base, cur, metrics=["cpu_ns_per_request"], run_noise=0.0)
    small = [c for c in strict.regressions if abs(c.change) < 0.08]
    assert small, strict.format()  # found by the statistics, left to a history by default
    assert not [c for c in cmp.regressions if (c.client, c.scenario) in
                {(s.client, s.scenario) for s in small}]
    with pytest.raises(ValueError, match="run_noise"):
        httpbench.diff(base, cur, run_noise=1.5)
