"""The messages between the judge's worker and the candidate's process, and the busy-wait around timed calls."""

import os
import time

import torch

from kfuse.judge import wire


def pipe():
    read_fd, write_fd = os.pipe()
    return os.fdopen(read_fd, "rb"), os.fdopen(write_fd, "wb")


def test_a_message_round_trips_as_plain_data():
    incoming, outgoing = pipe()
    wire.send(outgoing, {"ms": 1.5, "outputs": [torch.arange(5.0)], "name": "x"})
    got = wire.receive(incoming)
    assert got["ms"] == 1.5 and got["name"] == "x" and torch.equal(got["outputs"][0], torch.arange(5.0))


def test_spinning_returns_as_soon_as_a_message_is_there():
    incoming, outgoing = pipe()
    wire.send(outgoing, {"ms": 1.0})
    began = time.perf_counter()
    wire.spin_until_readable(incoming, seconds=5.0)
    assert time.perf_counter() - began < 1.0
    assert wire.receive(incoming) == {"ms": 1.0}


def test_spinning_gives_up_after_its_time_and_a_closed_peer_ends_it(monkeypatch):
    monkeypatch.setattr(wire, "SPIN", True)  # (as on a machine of three cores or more)
    incoming, outgoing = pipe()
    began = time.perf_counter()
    wire.spin_until_readable(incoming, seconds=0.05)
    assert 0.05 <= time.perf_counter() - began < 1.0
    outgoing.close()  # end of file is readable: the spin stops and receive reports the peer gone
    wire.spin_until_readable(incoming, seconds=5.0)
    try:
        wire.receive(incoming)
    except wire.PeerGone:
        return
    raise AssertionError("receive did not report the closed peer")


def test_no_spinning_on_fewer_cores_than_the_spinning_processes(monkeypatch):
    monkeypatch.setattr(wire, "SPIN", False)
    incoming, _ = pipe()
    began = time.perf_counter()
    wire.spin_until_readable(incoming, seconds=5.0)
    assert time.perf_counter() - began < 0.5
