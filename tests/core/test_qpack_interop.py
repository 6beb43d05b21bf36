"""QPACK (csrc/core/h3codec/hb_qpack.c) against pylsqpack (ls-qpack, a maintained QPACK library
that aioquic uses): field sections pylsqpack encodes with its dynamic table off decode to
the same fields with ours, and ours decode to the same fields with pylsqpack's decoder,
over many generated header lists (static-table hits, name-only hits, literal names,
empty, long and non-ASCII values, Huffman-coded strings from pylsqpack). Ours goes through
tests/c/qpack_pipe.c, built with the sanitizers."""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess

import pytest

pylsqpack = pytest.importorskip("pylsqpack", reason="pylsqpack not installed (pip install aioquic)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORE = os.path.join(ROOT, "csrc", "core")
CDIR = os.path.join(ROOT, "tests", "c")
CC = os.environ.get("CC") or shutil.which("clang") or shutil.which("gcc") or "cc"

Headers = list[tuple[bytes, bytes]]

# names of the static table and values it pairs them with (a sample: hits and near misses)
STATIC = [(b":authority", b""), (b":path", b"/"), (b":method", b"GET"), (b":method", b"POST"),
          (b":method", b"PUT"), (b":scheme", b"https"), (b":status", b"200"),
          (b":status", b"404"), (b":status", b"500"), (b"accept", b"*/*"),
          (b"content-type", b"application/json"), (b"content-type", b"text/plain"),
          (b"content-length", b"0"), (b"user-agent", b""), (b"cache-control", b"no-cache"),
          (b"x-frame-options", b"sameorigin"), (b"access-control-allow-credentials", b"TRUE"),
          (b"content-security-policy",
           b"script-src 'none'; object-src 'none'; base-uri 'none'")]


@pytest.fixture(scope="module")
def pipe(tmp_path_factory) -> str:
    if not os.path.isdir(CORE):
        pytest.skip("C sources not present (installed without the source tree)")
    if shutil.which(CC) is None and not os.path.exists(CC):
        pytest.skip(f"no C compiler ({CC})")
    exe = str(tmp_path_factory.mktemp("qpack") / "qpack_pipe")
    cmd = [CC, "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-I", CORE,
           os.path.join(CDIR, "qpack_pipe.c"), os.path.join(CORE, "h3codec", "hb_qpack.c"),
           os.path.join(CORE, "h3codec", "hb_h3_frame.c"), os.path.join(CORE, "http", "hb_huff.c"),
           os.path.join(CORE, "base", "hb_common.c"), "-o", exe, "-lpthread"]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return exe


def _run(exe: str, requests: list[bytes]) -> bytes:
    run = subprocess.run([exe], input=b"".join(requests), capture_output=True, timeout=300,
                         env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1"))
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    return run.stdout


def _decode_all(exe: str, sections: list[bytes]) -> list[Headers | int]:
    """Each section decoded by ours: its fields, or the HTTP/3 error code."""
    out = _run(exe, [b"D" + struct.pack(">I", len(s)) + s for s in sections])
    res: list[Headers | int] = []
    at = 0
    for _ in sections:
        (count,) = struct.unpack_from(">I", out, at)
        at += 4
        if count == 0xFFFFFFFF:
            res.append(struct.unpack_from(">I", out, at)[0])
            at += 4
            continue
        fields: Headers = []
        for _ in range(count):
            (nl,) = struct.unpack_from(">I", out, at)
            name = out[at + 4:at + 4 + nl]
            at += 4 + nl
            (vl,) = struct.unpack_from(">I", out, at)
            fields.append((name, out[at + 4:at + 4 + vl]))
            at += 4 + vl
        res.append(fields)
    assert at == len(out)
    return res


def _encode_all(exe: str, lists: list[Headers]) -> list[bytes]:
    reqs = []
    for h in lists:
        body = b"".join(struct.pack(">I", len(n)) + n + struct.pack(">I", len(v)) + v
                        for n, v in h)
        reqs.append(b"E" + struct.pack(">I", len(h)) + body)
    out = _run(exe, reqs)
    res, at = [], 0
    for _ in lists:
        (n,) = struct.unpack_from(">I", out, at)
        res.append(out[at + 4:at + 4 + n])
        at += 4 + n
    assert at == len(out)
    return res


def _value(rng: random.Random) -> bytes:
    kind = rng.random()
    n = rng.choice([0, 1, 3, 10, 40, 126, 127, 128, 300]) if kind < 0.9 else rng.randint(1000, 3000)
    if kind < 0.6:  # printable: Huffman shortens it, so pylsqpack uses it
        return bytes(rng.randint(0x20, 0x7E) for _ in range(n))
    if kind < 0.8:  # digits and lowercase
        return bytes(rng.choice(b"0123456789abcdef") for _ in range(n))
    return bytes(rng.randint(0x80, 0xFF) if rng.random() < 0.5 else rng.randint(0x21, 0x7E)
                 for _ in range(n))  # long Huffman codes; raw wins


def _name(rng: random.Random) -> bytes:
    n = rng.choice([1, 2, 6, 7, 8, 20, 60, 200])
    return bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789-_") for _ in range(n))


def _headers(rng: random.Random) -> Headers:
    h: Headers = []
    for _ in range(rng.randint(0, 24)):
        r = rng.random()
        if r < 0.3:
            h.append(rng.choice(STATIC))  # exact static entry
        elif r < 0.6:
            h.append((rng.choice(STATIC)[0], _value(rng)))  # static name, other value
        else:
            h.append((_name(rng), _value(rng)))
    return h


LISTS = [_headers(random.Random(seed)) for seed in range(400)]


@pytest.mark.slow
def test_pylsqpack_sections_decode_with_ours(pipe: str) -> None:
    sections = []
    for i, h in enumerate(LISTS):
        enc = pylsqpack.Encoder()
        assert enc.apply_settings(max_table_capacity=0, blocked_streams=0) == b""
        stream_data, section = enc.encode(4 * i, h)
        assert stream_data == b""  # nothing for a dynamic table
        sections.append(section)
    # pylsqpack Huffman-codes strings where that is shorter: ours must decode those too
    assert sum(len(s) for s in sections) < sum(len(n) + len(v) for h in LISTS for n, v in h)
    assert _decode_all(pipe, sections) == LISTS


@pytest.mark.slow
def test_our_sections_decode_with_pylsqpack(pipe: str) -> None:
    sections = _encode_all(pipe, LISTS)
    assert sections[LISTS.index([])] == b"\x00\x00"
    for i, (h, section) in enumerate(zip(LISTS, sections, strict=True)):
        if not h:  # ls-qpack refuses an empty section (that it encodes as 00 00 itself)
            continue
        dec = pylsqpack.Decoder(0, 0)
        stream_data, fields = dec.feed_header(4 * i, section)
        assert stream_data == b""  # no Section Acknowledgment: Required Insert Count is 0
        assert fields == h
    # and ours reads its own output the same
    assert _decode_all(pipe, sections) == LISTS


@pytest.mark.slow
def test_dynamic_table_references_are_refused(pipe: str) -> None:
    # A peer that ignores our capacity of 0 and references its dynamic table: ours fails
    # the section with QPACK_DECOMPRESSION_FAILED (0x200), never reads it as fields.
    enc = pylsqpack.Encoder()
    enc.apply_settings(max_table_capacity=4096, blocked_streams=16)
    h = [(b":method", b"GET"), (b"x-long-custom-name", b"some value that is worth indexing")]
    sections = [enc.encode(4 * i, h)[1] for i in range(3)]
    assert any(s[0] != 0 for s in sections)  # Required Insert Count > 0 somewhere
    got = _decode_all(pipe, sections)
    assert [g for s, g in zip(sections, got, strict=True) if s[0] != 0] == [0x200] * sum(s[0] != 0
                                                                        for s in sections)
