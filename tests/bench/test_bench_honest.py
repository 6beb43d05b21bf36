"""The load generator accounts for what it did: rate-mode sends and misses,
ab's Connection Times that add up, connection attempts apart from requests,
exit codes with thresholds, output files checked before the run, ab's flags."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import httpbench
import pytest
from httpbench._hist import hist_count, hist_stat
from httpbench.report import export_histogram, format_report, format_spectrum, hdr_hgrm


def _cli(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "httpbench", *args], capture_output=True,
                          text=True, timeout=timeout, **kw)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens there now
    return port


# --- rate mode -------------------------------------------------------------------------


def _check_identity(r: httpbench.BenchResult, rate: float, conns: int) -> None:
    expected = rate * r.duration_ns / 1e9
    assert abs(r.sends + r.unsent - expected) <= conns + 1, (r.sends, r.unsent, expected)
    # on time + missed = scheduled: every slot is counted exactly once
    assert (r.sends - r.sends_late) + r.missed == r.sends + r.unsent


@pytest.mark.slow
def test_rate_overload_counts_missed_and_warns(server):
    # 2 connections of a 10 ms endpoint can send ~200/s, not 500/s.
    r = httpbench.bench(server.url + "/delay/10", duration=1, concurrency=2, rate=500)
    _check_identity(r, 500, 2)
    assert r.target_rate == 500
    assert r.send_rate < 0.95 * 500 and r.missed > 100
    text = format_report(r)
    assert "Target rate:" in text and "Achieved send rate:" in text
    assert re.search(rf"Missed sends:\s+{r.missed} ", text)
    assert "WARNING: sent" in text
    d = r.to_dict()
    assert d["sends"] == r.sends and d["unsent"] == r.unsent
    back = httpbench.BenchResult.from_dict(d)
    assert back.missed == r.missed and back.sends_late == r.sends_late


@pytest.mark.slow
def test_rate_kept_identity_and_measured_time_per_request(server):
    r = httpbench.bench(server.url, duration=1, concurrency=4, rate=400)
    _check_identity(r, 400, 4)
    text = format_report(r)
    # "Time per request" is the measured mean, not concurrency / rate.
    line = next(x for x in text.splitlines() if "measured from the actual send" in x)
    shown = float(line.split()[3])
    assert shown == pytest.approx(hist_stat(r.latency_uncorrected, "mean") / 1e6, abs=0.002)
    assert "10.000 [ms] (mean)" not in text
    if r.send_rate >= 0.95 * 400:
        assert "WARNING" not in text


def test_closed_loop_has_no_rate_fields(server):
    r = httpbench.bench(server.url, n=20)
    assert r.missed is None and r.target_rate is None and r.sends == 20
    d = r.to_dict()
    assert "unsent" not in d and "sends_late" not in d
    assert "Missed sends" not in format_report(r)


def test_old_records_load_without_new_fields(server):
    r = httpbench.bench(server.url, n=5)
    d = r.to_dict()
    for k in ("setup", "sends", "connect_attempts", "connect_failures", "connect_fd_exhausted"):
        d.pop(k, None)
    back = httpbench.BenchResult.from_dict(d)
    assert back.setup is None and back.sends is None and back.send_rate is None
    assert "Connection Times (ms)" in format_report(back)


# --- Connection Times ---------------------------------------------------------------------


def _mean_ms(h) -> float:
    return hist_stat(h, "mean") / 1e6


@pytest.mark.parametrize("keepalive", [True, False])
def test_connect_plus_processing_is_total(server, keepalive):
    r = httpbench.bench(server.url, n=300, concurrency=2, keepalive=keepalive)
    n = r.responses
    assert hist_count(r.setup) == hist_count(r.processing) == hist_count(r.latency) == n
    total = _mean_ms(r.latency)
    # The histogram keeps 3 significant digits per value: the identity holds to that.
    assert _mean_ms(r.setup) + _mean_ms(r.processing) == pytest.approx(total, rel=0.01, abs=2e-4)
    if not keepalive:  # each request opened its connection: Connect carries that time
        assert hist_stat(r.setup, "min") > 0
    rows = {}
    for line in format_report(r).splitlines():
        m = re.match(r"(Connect|Processing|Waiting|Total):\s+(\S+)\s+(\S+)", line)
        if m:
            rows[m.group(1)] = float(m.group(3))
    assert rows["Connect"] + rows["Processing"] == pytest.approx(rows["Total"], rel=0.01,
                                                                  abs=0.0025)
    assert rows["Waiting"] <= rows["Processing"] + 0.001


# --- failures ---------------------------------------------------------------------------


@pytest.mark.slow
def test_refused_port_bounded_attempts_and_reported():
    port = _free_port()
    t0 = time.monotonic()
    r = httpbench.bench(f"http://127.0.0.1:{port}/", duration=1, concurrency=2)
    secs = time.monotonic() - t0
    assert r.responses == 0 and r.connections == 0
    assert r.connect_attempts == r.connect_failures >= 2
    # at most 1,000 attempts/s per connection (with backoff, far fewer)
    assert r.connect_attempts <= 2 * 1000 * secs
    assert r.connect_attempts < 200
    text = format_report(r)
    assert f"connection refused: {r.connect_attempts} attempts, 0 requests sent" in text


def test_refused_port_n_mode_still_exact():
    port = _free_port()
    r = httpbench.bench(f"http://127.0.0.1:{port}/", n=5)
    assert r.error_counts["connect"] == 5 and r.connect_attempts == 5


def _limited(script: str, nofile: int) -> subprocess.CompletedProcess:
    pre = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile}))
    """)
    return subprocess.run([sys.executable, "-c", pre + textwrap.dedent(script)],
                          capture_output=True, text=True, timeout=60)


def test_too_many_connections_for_the_fd_limit_fails(server):
    p = _limited(f"""
        from httpbench._cli import main
        sys.exit(main(["{server.url}", "-c", "500", "-d", "1s", "-q"]))
    """, 200)
    assert p.returncode == 1, p.stderr
    assert "open-file limit is 200" in p.stderr


@pytest.mark.slow
def test_emfile_during_the_run_exits_non_zero(server):
    # The limit allows the connections, but the descriptors are used up by the time they open.
    p = _limited(f"""
        import os
        from httpbench._cli import main
        hold = []
        try:
            while True:
                hold.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        for fd in hold[:12]:
            os.close(fd)
        sys.exit(main(["{server.url}", "-c", "30", "-d", "0.5s", "-q"]))
    """, 256)
    assert p.returncode == 1, (p.stdout[-2000:], p.stderr)
    assert "lack of file descriptors" in p.stderr
    assert "for lack of file descriptors" in p.stdout  # the report's attempts line


# --- exit codes ---------------------------------------------------------------------------


def test_threshold_fail_exits_1_with_table(server):
    p = _cli(server.url, "-n", "20", "-q", "--threshold", "p99<1ns", "--threshold", "errors<1%",
             "--threshold", "non_2xx=0", "--threshold", "rps>1")
    assert p.returncode == 1, p.stderr
    assert "Thresholds: 1 of 4 failed" in p.stdout
    table = p.stdout[p.stdout.index("Thresholds:"):]
    assert re.search(r"p99 .* FAIL", table) and re.search(r"non_2xx .* ok", table)
    assert re.search(r"error_rate .* ok", table)


def test_threshold_pass_exits_0(server):
    p = _cli(server.url, "-n", "20", "-q", "--threshold", "p99<10s", "--threshold", "errors=0")
    assert p.returncode == 0, p.stderr
    assert "Thresholds: all 2 held" in p.stdout


def test_non_2xx_without_threshold_warns_exit_0(server):
    p = _cli(server.url + "/status/503", "-n", "20", "-q")
    assert p.returncode == 0
    assert "warning: 0 failed requests and 20 non-2xx responses" in p.stderr
    p = _cli(server.url + "/status/503", "-n", "20", "-q", "--threshold", "non_2xx=0")
    assert p.returncode == 1


@pytest.mark.slow
def test_bad_threshold_is_a_usage_error(server):
    for expr in ("p99", "p99<2", "bogus<1", "rps>fast"):
        p = _cli(server.url, "-n", "1", "--threshold", expr)
        assert p.returncode == 2, (expr, p.stderr)
        assert "--threshold" in p.stderr


# --- output files -------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--json", "-e"])
def test_unwritable_output_fails_before_the_run(server, tmp_path, flag):
    before = server.stats()["requests"]
    t0 = time.monotonic()
    p = _cli(server.url, "-d", "5s", flag, "/nonexistent/dir/x.json")
    assert time.monotonic() - t0 < 1.0 + 1.0  # interpreter start-up included
    assert p.returncode == 2 and "does not exist" in p.stderr
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if not os.access(ro, os.W_OK):  # root writes anywhere
        p = _cli(server.url, "-d", "5s", flag, str(ro / "x.json"))
        assert p.returncode == 2 and "not writable" in p.stderr
    assert server.stats()["requests"] == before


@pytest.mark.slow
def test_sigint_writes_partial_json(server, tmp_path):
    out = tmp_path / "part.json"
    p = subprocess.Popen([sys.executable, "-m", "httpbench", server.url, "-d", "20s", "-q",
                          "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=20)
    assert p.returncode == 130, err
    rec = json.loads(out.read_text())["record"]
    assert rec["interrupted"] is True and rec["responses"] > 0


def test_hlog_carries_the_run_time_range(server, tmp_path):
    r = httpbench.bench(server.url, n=50)
    path = tmp_path / "lat.hlog"
    export_histogram(r, path)
    text = path.read_text()
    m = re.search(r"#\[StartTime: ([0-9.]+) ", text)
    assert m and float(m.group(1)) == pytest.approx(r.start_unix_ns / 1e9, abs=1e-3)
    row = [x for x in text.splitlines() if x and not x.startswith(("#", '"'))][0]
    start, length = (float(v) for v in row.split(",")[:2])
    assert start == 0.0 and length == pytest.approx(r.duration_ns / 1e9, abs=1e-3)


def test_latency_spectrum_matches_hgrm_rows(server):
    r = httpbench.bench(server.url, n=200)

    def rows(text: str) -> list[tuple[float, float, int]]:
        out = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 3 and re.fullmatch(r"[0-9.]+", parts[0]):
                out.append((round(float(parts[0]), 3), round(float(parts[1]), 6), int(parts[2])))
        return out

    spec, hgrm = rows(format_spectrum(r.latency)), rows(hdr_hgrm(r.latency))
    assert spec and spec == hgrm
    assert spec[0][2] >= 1


# --- ab's flags ---------------------------------------------------------------------------


@pytest.mark.parametrize("flag,word", [("-g", "--json"), ("-v", "--latency")])
def test_rejected_ab_flags_name_the_equivalent(server, flag, word):
    p = _cli(flag, "2", server.url, "-n", "1")
    assert p.returncode == 2
    assert word in p.stderr and "URL" not in p.stderr.splitlines()[-1]


def test_accepted_ab_flags(server, tmp_path):
    out, csv = tmp_path / "r.json", tmp_path / "p.csv"
    p = _cli("-i", "-s", "3", "-l", "-e", str(csv), "--json", str(out), "-n", "10", "-q",
             server.url)
    assert p.returncode == 0, p.stderr
    rec = json.loads(out.read_text())["record"]
    assert rec["method"] == "HEAD" and rec["config"]["timeout_ns"] == 3_000_000_000
    lines = csv.read_text().splitlines()
    assert lines[0] == "Percentage served,Time in ms" and len(lines) == 102
    assert lines[1].startswith("0,") and lines[-1].startswith("100,")
    p = _cli("-m", "POST", "--json", str(out), "-n", "3", "-q", server.url)
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["record"]["method"] == "POST"


def test_top_level_help_lists_load_test_flags():
    p = _cli("--help")
    assert p.returncode == 0
    for flag in ("--requests", "--concurrency", "--rate", "--threshold", "--json", "compare"):
        assert flag in p.stdout
