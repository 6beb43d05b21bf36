"""``httpbench.compare`` end to end: isolated workers against the embedded server.

Every installed adapter runs every default scenario (small n) in its own
worker process; the server's stats must agree with what each worker says it
sent, bodies/downloads/POSTs must verify, and keep-alive must hold. Broken
workers (crash, hang, failing setup) and missing libraries are reported
without stopping the run; the Nagle/delayed-ACK anomaly is detected on a
raw-socket client built to show it, and not on a clean one.
"""

from __future__ import annotations

import json
import os
import re
import textwrap

import httpbench
import pytest
from httpbench._adapters import DEFAULT_CLIENTS, available_clients
from httpbench._compare import cli_main
from httpbench._reportcli import cli_main as cli_report
from httpbench._scenarios import SCENARIOS
from httpbench.report import cell_rows, format_tables

INSTALLED = available_clients(DEFAULT_CLIENTS)
BAD_NOTES = {"errors", "bad-response", "count-mismatch", "new-connections", "worker-failed",
             "worker-crashed", "worker-hung", "early-answer", "nagle-40ms"}

# Test-only adapters, written to a temporary module the workers import.
HELPERS = textwrap.dedent('''
    import os, socket, sys, time
    from httpbench._adapters import Adapter

    class RawPost(Adapter):
        """POST head and body in two writes on a socket: Nagle on unless NODELAY."""
        name = "raw-nagle"
        nodelay = False

        def _setup(self):
            self.sock = socket.create_connection((self.host, self.port), timeout=10)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(self.nodelay))
            self.head = (f"{self.method} {self.path} HTTP/1.1\\r\\nHost: {self.host}\\r\\n"
                         f"Content-Length: {len(self.body)}\\r\\n\\r\\n").encode()

        def request(self):
            self.sock.sendall(self.head)
            self.sock.sendall(self.body)
            buf = b""
            while b"\\r\\n\\r\\n" not in buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                buf += chunk
            head, _, rest = buf.partition(b"\\r\\n\\r\\n")
            lines = head.decode("latin-1").split("\\r\\n")
            n = 0
            for line in lines[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    n = int(v)
            while len(rest) < n:
                rest += self.sock.recv(65536)
            self.last_status = int(lines[0].split()[1])
            self.last_body = rest

        def close(self):
            self.sock.close()

    class RawPostNoDelay(RawPost):
        name = "raw-nodelay"
        nodelay = True

    class Crash(Adapter):
        name = "crash"
        def _setup(self):
            self.calls = 0
            import http.client
            self.conn = http.client.HTTPConnection(self.host, self.port)
        def get(self):
            self.conn.request("GET", self.path)
            r = self.conn.getresponse()
            self.last_body, self.last_status = r.read(), r.status
        def request(self):
            self.calls += 1
            if self.calls > 3:  # after the warm-up: die in the middle of a round
                sys.stderr.write("crash-marker: the adapter is going down\\n")
                sys.stderr.flush()
                os._exit(3)
            self.get()

    class Hang(Crash):
        name = "hang"
        def request(self):
            self.calls += 1
            if self.calls > 3:
                time.sleep(600)
            self.get()

    class BadSetup(Adapter):
        name = "bad-setup"
        def _setup(self):
            raise RuntimeError("setup-marker: cannot build the client")

    class NotInstalled(Adapter):
        name = "not-installed"
        modules = ("hb_surely_missing_module",)
        pip_name = "hb-surely-missing"
''')


@pytest.fixture()
def helpers(tmp_path, monkeypatch):
    (tmp_path / "hb_test_adapters.py").write_text(HELPERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + (":" + old if old else ""))
    return "hb_test_adapters"


def _notes(rs, client=None, scenario=None):
    return [n for n in rs.notes if (client is None or n.client == client)
            and (scenario is None or n.scenario == scenario)]


E2E_CLIENTS = [c for c in ("native", "http.client", "aiohttp", "curl") if c in INSTALLED]
E2E_SCENARIOS = ["get-150b", "post-300k-file", "download-80k", "https-get-150b",
                 "get-150b-new-conn", "get-150b-concurrent"]


@pytest.mark.slow
def test_compare_in_worker_processes_matches_server_stats():
    """Sync, async and process-level clients in isolated workers, interleaved repeats.

    (Every adapter × every default scenario runs in tests/test_adapters.py
    through the same worker code in process; here the process isolation.)
    """
    rs = httpbench.compare(clients=E2E_CLIENTS, scenarios=E2E_SCENARIOS, repeat=2, n=4,
                           plots=False, warmup=1, timeout=120)
    assert isinstance(rs, httpbench.ResultSet)
    assert rs.clients == E2E_CLIENTS
    problems = [str(n) for n in rs.notes if n.kind in BAD_NOTES]
    assert not problems, "\n".join(problems)
    # interleaved: A B C A B C within each scenario
    keys = [k for k in rs.keys() if k[1] == "get-150b"]
    assert keys == [(c, "get-150b", i) for i in range(2) for c in E2E_CLIENTS]
    pids = set()
    for client in E2E_CLIENTS:
        for name in E2E_SCENARIOS:
            sc = SCENARIOS[name]
            for rep in range(2):
                r = rs.get(client, name, rep)
                assert r is not None, f"{client}/{name} missing"
                md = r.metadata
                assert r.errors == 0
                assert md["verify"]["ok"], (client, name, md["verify"])
                srv = md["server"]
                n = 16 if sc.concurrency > 1 and md["kind"] != "async" else 4
                # the server saw exactly the requests the worker made in the round
                assert srv["requests"] == r.calls == md["worker_requests"] == n, (client, name)
                if md["kind"] == "process" or not sc.keep_alive:
                    assert srv["connections"] == r.calls, (client, name, srv)
                else:
                    # kept alive since warm-up (a library may re-open one idle-expired
                    # connection between interleaved rounds, never one per request)
                    assert srv["connections"] <= 1, (client, name, srv)
                assert srv["cpu_ns"] > 0
                assert r.latency.count == r.calls
                pids.add((client, name, md["worker"]["pid"]))
            # both repeats ran in the same fresh worker of this (client, scenario)
            assert len({p for c, s, p in pids if (c, s) == (client, name)}) == 1
    assert len({p for _, _, p in pids}) == len(E2E_CLIENTS) * len(E2E_SCENARIOS)
    md = rs.metadata
    for key in ("python", "openssl", "kernel", "cpu_model", "clock_source", "client_versions"):
        assert md.get(key), key
    assert set(md["client_versions"]) == set(E2E_CLIENTS)
    assert md["wakeup_ns"]["same_cpu"] > 0
    for name in E2E_SCENARIOS:  # every scenario's placement recorded, the worker where it says
        pl = md["placement"][name]
        assert pl["mode"] in ("same", "split", "unpinned")
        if len(os.sched_getaffinity(0)) >= 2:
            assert pl["mode"] != "unpinned"
            r = rs.get(E2E_CLIENTS[0], name, 0)
            assert r.metadata["worker"]["affinity"] == pl["client_cpus"]
            assert r.metadata["worker"]["cpus"] == 1
    text = format_tables(rs)
    for name in E2E_SCENARIOS:
        assert f"== {name}" in text


@pytest.mark.slow
def test_missing_unknown_and_broken_clients_do_not_stop_the_run(helpers):
    m = helpers
    rs = httpbench.compare(
        clients=["http.client", f"{m}:Crash", f"{m}:Hang", f"{m}:BadSetup",
                 f"{m}:NotInstalled", "no-such-client"],
        scenarios=["get-150b"], repeat=2, n=20, plots=False, timeout=6,
    )
    # the good client ran both interleaved rounds
    assert [k for k in rs.keys() if k[0] == "http.client"] == [
        ("http.client", "get-150b", 0), ("http.client", "get-150b", 1)]
    assert "pip install hb-surely-missing" in rs.skipped[f"{m}:NotInstalled"]
    assert "unknown client" in rs.skipped["no-such-client"]
    crashed = [n for n in _notes(rs, f"{m}:Crash") if n.kind == "worker-crashed"]
    assert len(crashed) == 1 and "crash-marker" in crashed[0].message
    assert "code 3" in crashed[0].message
    hung = [n for n in _notes(rs, f"{m}:Hang") if n.kind == "worker-hung"]
    assert len(hung) == 1 and "6 s" in hung[0].message
    bad = [n for n in _notes(rs, f"{m}:BadSetup") if n.kind == "worker-failed"]
    assert len(bad) == 1 and "setup-marker" in bad[0].message
    for c in (f"{m}:Crash", f"{m}:Hang", f"{m}:BadSetup"):
        assert rs.repeats(c, "get-150b") == []
    text = format_tables(rs)
    assert "worker-crashed" in text and "Skipped:" in text


@pytest.mark.slow
def test_nagle_anomaly_detected_only_where_it_happens(helpers):
    m = helpers
    rs = httpbench.compare(
        clients=[f"{m}:RawPost", f"{m}:RawPostNoDelay", "http.client"],
        scenarios=["nagle:method=POST,path=/sink,body=200,n=20"],
        repeat=1, plots=False, timeout=60,
    )
    for c in (f"{m}:RawPost", f"{m}:RawPostNoDelay", "http.client"):
        r = rs.get(c, "nagle", 0)
        assert r is not None and r.errors == 0 and r.metadata["verify"]["ok"], c
        assert r.metadata["server"]["requests"] == 20
    nagle = [n for n in rs.notes if n.kind == "nagle-40ms"]
    assert [n.client for n in nagle] == [f"{m}:RawPost"]
    slow, fast = rs.get(f"{m}:RawPost", "nagle", 0), rs.get(f"{m}:RawPostNoDelay", "nagle", 0)
    assert slow.p50 > 30e6 > fast.p50  # the 40 ms delayed-ACK stall, generous bounds


@pytest.mark.slow
def test_cli_tables_json_and_files(tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli_main(["--clients", "http.client,urllib3", "--scenarios",
                   "get-150b,small-post:method=POST;path=/sink;body=1k", "--repeat", "2",
                   "--n", "5", "--out", str(out), "--no-plots", "-q"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    for col in ("client", "req/s", "p50", "p99", "CPU µs/req", "Python allocs/req",
                "native allocs/req", "KiB allocated/req", "GC/10k req", "peak RSS", "notes"):
        assert col in cap.out
    assert "== get-150b" in cap.out and "== small-post" in cap.out
    # the measuring time on the Run line; the whole command's wall time last, saved too
    assert re.search(r"^Run: .*; measured in \d+\.\d s$", cap.out, re.M)
    took = re.search(r"^Took (\d+\.\d) s in all \(measuring (\d+\.\d) s; results, plots and "
                     r"HTML \d+\.\d s\)$", cap.out, re.M)
    assert took and float(took[1]) >= float(took[2]) and cap.out.count("Took ") == 1
    assert (out / "report.html").exists() and f", {out / 'report.html'}" in cap.out
    rs = httpbench.load(out / "results.json")
    assert rs.metadata["wall_s"] >= rs.metadata["duration_s"]
    # report of the saved run prints all that compare printed
    assert cli_report([str(out / "results.json")]) == 0
    again = capsys.readouterr().out
    for part in ("== get-150b — GET of a ~150-byte body", "Run: ", "Clients: ", "Verdict:",
                 "ranked by CPU per request", "Took "):
        assert part in again, part
    assert len(rs) == 2 * 2 * 2
    assert rs.get("urllib3", "small-post", 1).metadata["server"]["requests"] == 5
    assert rs.get("urllib3", "small-post", 1).metadata["verify"]["ok"]
    rows = cell_rows(rs, "get-150b")
    assert [r["client"] for r in rows] == ["http.client", "urllib3"]
    assert all(r["repeats"] == 2 and r["requests"] == 10 and r["rps"] > 0 for r in rows)
    assert (out / "tables.txt").read_text() == format_tables(rs)

    first = rs.get("http.client", "get-150b", 0)
    from httpbench._workerproc import preload_library

    if preload_library() is not None:  # on by default on Linux when the counter is built
        assert first.native_alloc_count is not None
        assert rs.metadata["native_alloc_counter"] == preload_library()

    argv = ["--clients", "http.client", "--scenarios", "get-12k", "--repeat", "1", "--n", "3",
            "--json", "--no-out", "-q", "--no-native-allocs", "--no-zygote"]
    if "curl" in INSTALLED:
        argv += ["--command", "curlcmd=curl -sS --fail -o {out} {url}"]
    rc = cli_main(argv)
    cap = capsys.readouterr()
    assert rc == 0
    doc = json.loads(cap.out)
    assert doc["format"] == "httpbench-results" and doc["record"]["kind"] == "ResultSet"
    rs = httpbench.ResultSet.from_dict(doc["record"])
    r = rs.get("http.client", "get-12k", 0)
    assert r.native_alloc_count is None and r.calls == 3
    if "curl" in INSTALLED:
        c = rs.get("curlcmd", "get-12k", 0)
        assert c.metadata["kind"] == "process" and c.cpu_ns > 0 and c.alloc_counts is None
        assert c.metadata["server"]["requests"] == 3 == c.metadata["server"]["connections"]


def test_cli_bad_arguments(capsys):
    assert cli_main(["--scenarios", "no-such-scenario", "--no-out", "-q"]) == 2
    assert "unknown scenario" in capsys.readouterr().err
    assert cli_main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "get-150b-concurrent" in out and "http.client" in out
    with pytest.raises(SystemExit):
        cli_main(["--repeat", "x"])


def test_compare_argument_errors():
    with pytest.raises(ValueError):
        httpbench.compare(clients=["http.client"], scenarios=["get-150b"], repeat=0)
    with pytest.raises(ValueError):
        httpbench.compare(clients=[], scenarios=["get-150b"])
    with pytest.raises(ValueError):
        httpbench.compare(clients=["http.client"], scenarios=["get-150b", "get-150b"])
    with pytest.raises(ValueError):
        httpbench.compare(clients=["http.client"], commands={"curl": ["curl"]})


@pytest.mark.slow
def test_early_answer_post_reported_and_echo_verified():
    rs = httpbench.compare(
        clients=["http.client", "urllib3"],
        scenarios=["early:method=POST,path=/fault/early-response?status=200,body=300k,n=5",
                   "echo:method=POST,path=/echo,body=100k,n=5"],
        repeat=1, plots=False, timeout=60,
    )
    for c in ("http.client", "urllib3"):
        early = [n for n in _notes(rs, c, "early") if n.kind == "early-answer"]
        assert len(early) == 1 and "5 of 5 POSTs" in early[0].message
        assert rs.get(c, "early", 0).metadata["server"]["early_answers"] == 5
        echo = rs.get(c, "echo", 0)
        assert echo.metadata["verify"]["ok"] and echo.errors == 0
        assert _notes(rs, c, "echo") == []
