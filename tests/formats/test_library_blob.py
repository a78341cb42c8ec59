"""The imports-blob and fatbin readers: exact round trips, and only jitflow errors on garbage."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jitflow.errors import LibraryFormatError
from jitflow.formats import fatbin, library_blob


def _sample_blob() -> bytes:
    cuda = library_blob.CudaPayload("fatbin", struct.pack("<Q", 0), [], b"\x50\xed\x55\xba" + b"\0" * 12)
    blob = library_blob.LibraryBlob([0, 1, 1], [1], [library_blob.BlobModule("_lib"),
                                                   library_blob.BlobModule("cuda", cuda.to_bytes())])
    return library_blob.serialize(blob)


def test_round_trip():
    raw = _sample_blob()
    blob = library_blob.parse(raw)
    assert blob.kinds() == ["_lib", "cuda"]
    assert library_blob.serialize(blob) == raw
    payload = library_blob.parse_cuda_payload(blob.modules[1].payload)
    assert payload.fmt == "fatbin" and payload.kernels == []


@pytest.mark.parametrize("cut", [0, 7, 8, 20, 40, -1])
def test_truncated_blob_is_a_format_error(cut):
    raw = _sample_blob()
    with pytest.raises(LibraryFormatError):
        library_blob.parse(raw[:cut] if cut >= 0 else raw[:-1])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_format_errors(data):
    for parse in (library_blob.parse, library_blob.parse_cuda_payload, fatbin.entries):
        try:
            parse(data)
        except LibraryFormatError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=200), st.integers(min_value=0, max_value=255))
def test_mutated_blob_only_raises_format_errors(position, value):
    raw = bytearray(_sample_blob())
    raw[position % len(raw)] = value
    try:
        blob = library_blob.parse(bytes(raw))
        for m in blob.modules:
            if m.kind == "cuda":
                library_blob.parse_cuda_payload(m.payload)
    except LibraryFormatError:
        pass
