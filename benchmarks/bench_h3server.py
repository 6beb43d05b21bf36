"""CPU per request of the embedded HTTP/3 listener (aioquic, in the server process)
against the CPU per request of the HTTP/3 clients it would serve, in one run.

The server must never be the limit of a sequential client measurement: its
CPU/request has to stay well below the cheapest client's. Each client makes
``N`` sequential 150-byte GETs on one connection (after a warm-up); the client's
figure is its own process CPU (``time.process_time_ns``), the server's is the
listener thread's CPU delta from the server's stats, both divided by ``N``.

    python benchmarks/bench_h3server.py [N] [--path /bytes/150]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import time

from httpbench._server import start_process


def pycurl_client(url: str, ca: str, version: str = "CURL_HTTP_VERSION_3ONLY"):  # noqa: ANN201
    import pycurl

    if version.endswith("3ONLY") and not pycurl.version_info()[4] & pycurl.VERSION_HTTP3:
        return None
    c = pycurl.Curl()
    c.setopt(pycurl.HTTP_VERSION, getattr(pycurl, version))
    c.setopt(pycurl.CAINFO, ca)
    c.setopt(pycurl.URL, url)

    def one() -> int:
        b = io.BytesIO()
        c.setopt(pycurl.WRITEDATA, b)
        c.perform()
        return len(b.getvalue())

    return one


def curl_cffi_client(url: str, ca: str, version: str = "V3ONLY"):  # noqa: ANN201
    from curl_cffi import CurlHttpVersion, requests

    s = requests.Session(http_version=getattr(CurlHttpVersion, version), verify=ca)

    def one() -> int:
        return len(s.get(url).content)

    return one


def aioquic_client(url: str, ca: str):  # noqa: ANN201
    from httpbench._adapters.aioquic_ import AioquicAdapter

    base, path = url.rsplit("/bytes", 1)
    a = AioquicAdapter()
    loop = asyncio.new_event_loop()
    loop.run_until_complete(a.asetup(base, ca, path="/bytes" + path, http3=True))

    def one() -> int:
        loop.run_until_complete(a.request())
        return len(a.last_body or b"")

    return one


def niquests_client(url: str, ca: str):  # noqa: ANN201
    from httpbench._adapters.niquests_ import NiquestsAdapter

    base, path = url.rsplit("/bytes", 1)
    a = NiquestsAdapter()
    a.setup(base, ca, path="/bytes" + path, http3=True)

    def one() -> int:
        a.request()
        return len(a.last_body or b"")

    return one


CLIENTS = {"pycurl": pycurl_client, "niquests": niquests_client, "curl_cffi": curl_cffi_client, "aioquic": aioquic_client}
# the same client over TCP to the same server process (its C listener), for contrast
TCP = {"pycurl-h2": (pycurl_client, "CURL_HTTP_VERSION_2TLS"),
       "pycurl-http/1.1": (pycurl_client, "CURL_HTTP_VERSION_1_1"),
       "curl_cffi-h2": (curl_cffi_client, "V2TLS"),
       "curl_cffi-http/1.1": (curl_cffi_client, "V1_1")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="?", default=1000)
    ap.add_argument("--path", default="/bytes/150")
    args = ap.parse_args()
    rows = []
    with start_process(tls=True, h3=True) as srv:
        contenders = [(n, "h3", m, srv.h3_url) for n, m in CLIENTS.items()]
        contenders += [(n, n.split("-", 1)[1], lambda u, ca, f=f, v=v: f(u, ca, v), srv.url)
                       for n, (f, v) in TCP.items()]
        for name, proto, make, base in contenders:
            try:
                one = make(base + args.path, srv.ca_file)
            except ImportError as exc:
                rows.append({"client": name, "skipped": str(exc)})
                continue
            if one is None:
                rows.append({"client": name, "skipped": "no HTTP/3 in this build"})
                continue
            for _ in range(50):
                one()
            s0 = srv.stats()
            c0, w0 = time.process_time_ns(), time.perf_counter_ns()
            got = sum(one() for _ in range(args.n))
            c1, w1 = time.process_time_ns(), time.perf_counter_ns()
            s1 = srv.stats()
            n_srv = s1["by_protocol"][proto] - s0["by_protocol"][proto]
            h3cpu = s1["h3"]["cpu_ns"] - s0["h3"]["cpu_ns"]
            cpu = h3cpu if proto == "h3" else s1["cpu_ns"] - s0["cpu_ns"] - h3cpu
            rows.append({
                "client": name, "protocol": proto, "n": args.n, "server_requests": n_srv,
                "body_bytes": got, "client_cpu_us": round((c1 - c0) / args.n / 1e3, 1),
                "server_cpu_us": round(cpu / args.n / 1e3, 1),
                "wall_us": round((w1 - w0) / args.n / 1e3, 1),
            })
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
