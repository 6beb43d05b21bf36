"""HPACK decoding cost per response header block, hb_h2_hpack against nghttp2's inflater.

benchmarks/bench_hpack.c linked with csrc/core/h2/hb_h2_hpack.c and http/hb_huff.c (-O2, as setup.py
builds it) and libnghttp2, two blocks decoded again and again, fields handed to
the same trivial callback: "nginx response" (:status 200 indexed; server,
date, content-type, content-length, last-modified, etag, accept-ranges as
literals without indexing with Huffman values; 101 bytes) and "indexed
response" (what nghttp2's deflater, as in the embedded server, sends once the
fields are in the dynamic table: 4 one-byte indexes and content-length, which it
never indexes, as a raw literal; 9 bytes). Instructions per block come from
callgrind (exact and machine-independent: the difference between runs of 4000
and 2000 blocks, divided by 2000, so start-up and table building cancel out);
ns per block from plain runs (best of --repeat).

usage: python benchmarks/bench_hpack.py [--blocks N] [--repeat R] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTENDERS = ("ours", "nghttp2")
CASES = {"nginx": "nginx response", "indexed": "indexed response"}


def _build(tmp: str) -> str | None:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None
    core = os.path.join(ROOT, "csrc", "core")
    exe = os.path.join(tmp, "bench_hpack")
    subprocess.run([cc, "-std=c11", "-O2", "-D_GNU_SOURCE", "-I", core,
                    os.path.join(ROOT, "benchmarks", "bench_hpack.c"),
                    os.path.join(core, "h2", "hb_h2_hpack.c"),
                    os.path.join(core, "http", "hb_huff.c"),
                    os.path.join(core, "base", "hb_common.c"),
                    os.path.join(core, "http", "hb_parse.c"), "-o", exe, "-lnghttp2", "-lpthread"],
                   check=True)
    return exe


def _instructions(exe: str, who: str, case: str, blocks: int, tmp: str) -> int:
    out = os.path.join(tmp, f"cg.{who}.{case}.{blocks}")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", exe, who,
                    case, str(blocks)], check=True, capture_output=True)
    with open(out) as f:
        for line in f:
            m = re.match(r"(?:summary|totals):\s+(\d+)", line)
            if m:
                return int(m.group(1))
    raise RuntimeError(f"no instruction total in {out}")


def run(blocks: int, repeat: int) -> dict:
    rows: list[dict] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = _build(tmp)
        if exe is None:
            return {"rows": [], "notes": ["no C compiler found: skipped"]}
        for case, label in CASES.items():
            for who in CONTENDERS:
                ns = []
                for _ in range(repeat):
                    out = subprocess.run([exe, who, case, str(blocks)], capture_output=True,
                                         text=True, check=True).stdout
                    ns.append(float(out.split()[1]))
                rows.append({"case": label, "contender": who, "metric": "time",
                             "unit": "ns/block", "values": [min(ns)]})
            if shutil.which("valgrind"):
                for who in CONTENDERS:
                    per = (_instructions(exe, who, case, 4000, tmp)
                           - _instructions(exe, who, case, 2000, tmp)) / 2000
                    rows.append({"case": label, "contender": who, "metric": "instructions",
                                 "unit": "instr/block", "values": [per]})
        if not shutil.which("valgrind"):
            notes.append("valgrind not installed: no instruction counts")
    notes.append(f"time is the best of {repeat} runs of {blocks} blocks")
    return {"rows": rows, "notes": notes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON here ('-': stdout)")
    a = ap.parse_args(argv)
    res = run(a.blocks, a.repeat)
    if a.json == "-":
        print(json.dumps(res))
        return 0
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)
    for r in res["rows"]:
        print(f"  {r['case']:<17} {r['contender']:<8} {r['metric']:<13} {r['values'][0]:10.1f} "
              f"{r['unit']}")
    for n in res["notes"]:
        print(f"  note: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
