"""Print the RFC 7541 Appendix B Huffman code lengths as the C array that
csrc/core/http/hb_huff.c holds (HUFF_LEN), after checking that the code is canonical:
sorted by (length, symbol), each code is the previous one plus one, shifted to
the new length. That property lets hb_huff.c rebuild every code from the
lengths alone. The data comes from the `hpack` package (pip install hpack)."""

from __future__ import annotations

from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH


def check_canonical() -> None:
    order = sorted(range(257), key=lambda s: (REQUEST_CODES_LENGTH[s], s))
    code, prev = 0, REQUEST_CODES_LENGTH[order[0]]
    for i, sym in enumerate(order):
        length = REQUEST_CODES_LENGTH[sym]
        if i:
            code = (code + 1) << (length - prev)
            prev = length
        assert REQUEST_CODES[sym] == code, f"symbol {sym}: not canonical"
    assert code == (1 << 30) - 1 and order[-1] == 256, "EOS is not the last, all-ones code"


def main() -> None:
    check_canonical()
    print("static const uint8_t HUFF_LEN[257] = {")
    for row in range(0, 257, 16):
        vals = ", ".join(str(v) for v in REQUEST_CODES_LENGTH[row:row + 16])
        print(f"    {vals},")
    print("};")


if __name__ == "__main__":
    main()
