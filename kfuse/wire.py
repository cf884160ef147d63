"""Messages between the judge's trusted worker and the candidate's process.

Frames: an 8-byte length, then a `torch.save` payload. The trusted side reads with `weights_only=True`, which
accepts tensors, numbers, strings and containers and never runs code: a candidate can send wrong data, not
instructions.
"""

from __future__ import annotations

import io
import struct

import torch

HEADER = struct.Struct("<Q")


class PeerGone(Exception):
    """The other process closed its end (it exited or died)."""


def send(stream, message: dict) -> None:
    buffer = io.BytesIO()
    torch.save(message, buffer)
    payload = buffer.getbuffer()
    stream.write(HEADER.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def _read_exactly(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(min(left, 1 << 26))
        if not chunk:
            raise PeerGone()
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(stream, device: str = "cpu") -> dict:
    (size,) = HEADER.unpack(_read_exactly(stream, HEADER.size))
    payload = _read_exactly(stream, size)
    message = torch.load(io.BytesIO(payload), map_location=device, weights_only=True)
    if not isinstance(message, dict):
        raise ValueError("malformed message")
    return message
