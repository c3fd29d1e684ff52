#!/usr/bin/env python3
"""Safetensors files written and read without the safetensors library, for test_safetensors.

The format is written out by hand here (struct, json, numpy) so that mdtp's reader and writer are
held against a second, independent reading of the public spec, not against themselves:

  write_safetensors.py write FILE EXPECTED.json
      writes FILE (F32, F64, F16, BF16, I32 and empty tensors, a UTF-8 name, __metadata__) and,
      in EXPECTED.json, every tensor's dtype, shape and values as float.hex() strings;
  write_safetensors.py verify FILE EXPECTED.json
      reads FILE (written by mdtp) and checks it against EXPECTED.json (written by the C++ test):
      the same tensors, header order, dtypes, shapes, values bit for bit, and metadata, and the
      layout mdtp promises (ranges contiguous in header order, data 8-byte aligned).

Exit status 0 when all is well; otherwise a message on stderr and status 1.
"""
import json
import math
import struct
import sys

import numpy as np

NUMPY_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I32": "<i4"}
ELEMENT_BYTES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I32": 4}


def bf16_bits(values):
    """float32 values rounded to bf16 (nearest, ties to even) as uint16 bit patterns."""
    bits = np.asarray(values, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2")


def bf16_values(bits):
    return (bits.astype("<u4") << 16).view("<f4")


def decode(dtype, raw, count):
    if dtype == "BF16":
        return bf16_values(np.frombuffer(raw, dtype="<u2", count=count))
    return np.frombuffer(raw, dtype=NUMPY_DTYPES[dtype], count=count)


def write(path, expected_path):
    f32 = (np.arange(12, dtype=np.float64).reshape(3, 4) - 5.5) / 3.0
    f32[0, 0] = 3.4028234663852886e38  # the largest float32
    f32[0, 1] = -1.401298464324817e-45  # the smallest subnormal, negative
    f32 = f32.astype("<f4")
    half = np.array([[1.0, -2.5, 65504.0], [6.0e-8, 0.333251953125, -0.0]], dtype="<f2")
    # A tie (1 + 2^-8 rounds to 1), a tie upwards (1 + 3 * 2^-8 to 1 + 2^-6) and ordinary values.
    brain_in = np.array([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -3.14159, 1.0e-20, 65504.0], dtype="<f4")
    brain = bf16_bits(brain_in)
    tensors = [  # (name, dtype, shape, bytes, values as float64) in data order
        ("model.brain", "BF16", [5], brain.tobytes(), bf16_values(brain)),
        ("ids", "I32", [2], np.array([7, -3], dtype="<i4").tobytes(), np.array([7, -3])),
        ("blöcke.0.weight", "F32", [3, 4], f32.tobytes(), f32),
        ("half", "F16", [2, 3], half.tobytes(), half),
        ("scale", "F64", [], np.array(math.pi, dtype="<f8").tobytes(), np.array([math.pi])),
        ("empty", "F32", [0, 4], b"", np.zeros(0)),
    ]
    header = {"__metadata__": {"format": "pt", "writer": "write_safetensors.py"}}
    data = b""
    for name, dtype, shape, raw, _ in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    # sort_keys: the header's order differs from the data's, which a reader must not rely on.
    text = json.dumps(header, sort_keys=True, ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        out.write(data)
    expected = {
        "metadata": header["__metadata__"],
        "tensors": [
            {"name": name, "dtype": dtype, "shape": shape,
             "values": [float(v).hex() for v in np.asarray(values, dtype=np.float64).ravel()]}
            for name, dtype, shape, _, values in tensors
        ],
    }
    with open(expected_path, "w", encoding="utf-8") as out:
        json.dump(expected, out, ensure_ascii=False, indent=1)


def fail(message):
    print("write_safetensors.py verify: " + message, file=sys.stderr)
    sys.exit(1)


def verify(path, expected_path):
    with open(expected_path, encoding="utf-8") as f:
        expected = json.load(f)
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    if (8 + length) % 8 != 0:
        fail(f"the data buffer starts at byte {8 + length}, not 8-byte aligned")
    header = json.loads(blob[8 : 8 + length].decode("utf-8"), object_pairs_hook=lambda pairs: pairs)
    data = blob[8 + length :]
    header = list(header)
    metadata = {}
    if header and header[0][0] == "__metadata__":
        metadata = dict(header.pop(0)[1])
    if metadata != expected["metadata"]:
        fail(f"metadata {metadata} != {expected['metadata']}")
    names = [name for name, _ in header]
    want = [t["name"] for t in expected["tensors"]]
    if names != want:
        fail(f"header order {names} != {want}")
    position = 0
    for (name, entry), t in zip(header, expected["tensors"]):
        entry = dict(entry)
        if sorted(entry) != ["data_offsets", "dtype", "shape"]:
            fail(f"tensor {name!r} has keys {sorted(entry)}")
        if entry["dtype"] != t["dtype"] or entry["shape"] != t["shape"]:
            fail(f"tensor {name!r}: {entry['dtype']} {entry['shape']} != {t['dtype']} {t['shape']}")
        begin, end = entry["data_offsets"]
        if begin != position:
            fail(f"tensor {name!r} starts at {begin}, not at {position} where the previous one ended")
        position = end
        count = math.prod(t["shape"])
        got = decode(t["dtype"], data[begin:end], count).astype(np.float64)
        if end - begin != count * ELEMENT_BYTES[t["dtype"]]:
            fail(f"tensor {name!r}: data_offsets {[begin, end]} for {count} elements of {t['dtype']}")
        want_values = np.array([float.fromhex(v) for v in t["values"]], dtype=np.float64)
        if got.view("<u8").tolist() != want_values.view("<u8").tolist():
            fail(f"tensor {name!r}: values {got.tolist()} != {want_values.tolist()}")
    if position != len(data):
        fail(f"the tensors end at byte {position} of a {len(data)}-byte data buffer")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("write", "verify"):
        print(__doc__, file=sys.stderr)
        return 2
    (write if sys.argv[1] == "write" else verify)(sys.argv[2], sys.argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
