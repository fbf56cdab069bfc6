#!/usr/bin/env python3
"""Writes the header of a GGUF file (magic, version, metadata, tensor infos, padding to the
data) without its tensor data: a small seed whose mutations land in the parts that parsers and
model construction read. With --metadata-only, the metadata alone (tensor count 0): a file
that parses, for the tokenizer built from GGUF metadata.
Usage: fuzz/gguf_header_seed.py [--metadata-only] IN.gguf OUT"""
import struct
import sys

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # type -> bytes
STRING, ARRAY = 8, 9


def header_end(b):
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, b, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = b[pos:pos + n]
        pos += n
        return s.decode("utf-8", "replace")

    def value(t):
        nonlocal pos
        if t in SCALAR:
            raw = b[pos:pos + SCALAR[t]]
            pos += SCALAR[t]
            return raw
        if t == STRING:
            return string()
        if t == ARRAY:
            it, n = take("I"), take("Q")
            if it in SCALAR:
                pos += SCALAR[it] * n
            else:
                for _ in range(n):
                    value(it)
            return None
        raise ValueError("unknown GGUF value type %d" % t)

    assert b[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    take("I")  # version
    n_tensors, n_kv = take("Q"), take("Q")
    alignment = 32
    for _ in range(n_kv):
        key = string()
        t = take("I")
        v = value(t)
        if key == "general.alignment" and t == 4:
            alignment = struct.unpack("<I", v)[0]
    kv_end = pos
    for _ in range(n_tensors):
        string()
        n_dims = take("I")
        pos += 8 * n_dims + 4 + 8
    return kv_end, (pos + alignment - 1) // alignment * alignment


def main(args):
    metadata_only = args[0] == "--metadata-only"
    src, dst = args[-2], args[-1]
    b = open(src, "rb").read()
    kv_end, end = header_end(b)
    if metadata_only:  # magic, version, tensor count 0, the metadata count and the metadata
        out = b[:8] + struct.pack("<Q", 0) + b[16:kv_end]
    else:
        out = b[:end]
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main(sys.argv[1:])
