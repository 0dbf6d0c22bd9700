"""The intake process(es) on a real socket: order kept (one intake), nothing lost at stop, a dead child noticed;
behind the door (several intakes), every message once."""

from __future__ import annotations

import asyncio

import pytest
import zmq

from rtsearch.errors import EndpointError
from rtsearch.io.spectra import read_spectra
from rtsearch.protocol.wire import encode_run_end, encode_run_start, encode_spectrum
from rtsearch.serve.intake.chunks import Received, SpectraChunk
from rtsearch.serve.intake.door import default_intakes
from rtsearch.serve.intake.intake import Intake


def _flatten(items) -> list[tuple]:
    out = []
    for item in items:
        if isinstance(item, SpectraChunk):
            out.extend(("spectrum", sp.scan) for _, sp, *_ in item.rows())
        else:
            assert isinstance(item, Received)
            m = item.message
            out.append((type(m).__name__, getattr(m, "scan", None)))
    return out


async def _push_and_read(intake: Intake, sent: list, stop_when) -> list[tuple]:
    """Push ``sent`` to the intake's endpoint; read until ``stop_when(got)`` says to stop it, then to the end."""
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(intake.endpoint)
    try:
        for frames in sent:
            push.send_multipart(frames)
        got: list[tuple] = []
        async with asyncio.timeout(30):
            async for items in intake:
                got.extend(_flatten(items))
                if stop_when(got):
                    intake.stop()
        return got
    finally:
        push.close(0)
        ctx.term()


@pytest.mark.asyncio
async def test_order_and_stop(data) -> None:
    spectra = list(read_spectra(data / "ecoli-small" / "Ecoli_MS2_small.mzML"))
    async with Intake("tcp://127.0.0.1:*", mode="pull") as intake:
        sent = [encode_run_start("Ecoli")]
        sent += [encode_spectrum(s) for s in spectra[:70]]
        bad = encode_spectrum(spectra[70])
        sent.append([bad[0], bad[1], bad[2][:-8], bad[3]])  # cut peak frame: answerable, invalid
        sent += [encode_spectrum(s) for s in spectra[71:]]
        sent.append(encode_run_end("Ecoli", len(spectra)))
        got = await _push_and_read(intake, sent, lambda got: got and got[-1][0] == "RunEnd")
    assert got[0] == ("RunStart", None) and got[-1] == ("RunEnd", None)
    assert got[71] == ("Invalid", spectra[70].scan)
    assert [g for g in got if g[0] == "spectrum"] == [("spectrum", s.scan) for s in spectra if s is not spectra[70]]
    assert intake.received == len(sent)


@pytest.mark.asyncio
async def test_door_spreads_every_message_once_over_intakes(data) -> None:
    """Three intake processes behind the door: each message arrives once, each process keeps its order, every
    process takes a share, and what was pushed before `stop` is all handed over."""
    spectra = list(read_spectra(data / "ecoli-small" / "Ecoli_MS2_small.mzML"))
    async with Intake("tcp://127.0.0.1:*", mode="pull", intakes=3) as intake:
        assert intake.door is not None and len(set(intake.pids)) == 3
        sent = [encode_run_start("Ecoli"), *(encode_spectrum(s) for s in spectra * 5)]
        sent.append(encode_run_end("Ecoli", len(spectra) * 5))
        # stopped while the last messages are in flight: the door stops, the intakes drain
        got = await _push_and_read(intake, sent, lambda got: len(got) >= len(sent) - 20)
    assert intake.received == len(sent) == len(got)
    assert min(intake.items_by_process) > 0, intake.items_by_process
    assert sorted(g[1] for g in got if g[0] == "spectrum") == sorted(s.scan for s in spectra * 5)
    assert [g[0] for g in got].count("RunStart") == 1 and [g[0] for g in got].count("RunEnd") == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("intakes", [1, 3])
async def test_dead_child_ends_iteration_with_an_error(intakes: int) -> None:
    async with Intake("tcp://127.0.0.1:*", mode="pull", intakes=intakes) as intake:
        intake._children[-1].proc.kill()
        with pytest.raises(RuntimeError, match="intake process .*exited"):
            async with asyncio.timeout(30):
                async for _ in intake:
                    pass


@pytest.mark.asyncio
@pytest.mark.parametrize("intakes", [1, 3])
async def test_endpoint_in_use_is_one_clear_error(intakes: int) -> None:
    ctx = zmq.Context()
    holder = ctx.socket(zmq.PULL)
    port = holder.bind_to_random_port("tcp://127.0.0.1")
    try:
        with pytest.raises(EndpointError, match="Address already in use"):
            async with Intake(f"tcp://127.0.0.1:{port}", mode="pull", intakes=intakes):
                pass
    finally:
        holder.close(0)
        ctx.term()


def test_default_intakes_one_per_four_cores_at_most_four() -> None:
    assert [default_intakes(c) for c in (1, 2, 7, 8, 12, 16, 64)] == [1, 1, 1, 2, 3, 4, 4]
