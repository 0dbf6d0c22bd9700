"""Door-shed spectra booked in their runs, the event loop never waiting on a run's lock
(`rtsearch.serve.runs.shed_book`)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np

from rtsearch.serve.runs.shed_book import RETRY_S, ShedBook
from rtsearch.types import ResultStatus


class _Live:
    def __init__(self, booked: list[tuple[str, list[int]]], name: str) -> None:
        self.booked, self.name = booked, name

    def book_unscored(self, status: ResultStatus, scans: Any, prec: Any, reasons: list[str], ids: list[str]) -> None:
        assert status is ResultStatus.SHED and len(reasons) == len(scans) == len(prec)
        self.booked.append((self.name, list(scans)))


class _State:
    def __init__(self, name: str, booked: list[tuple[str, list[int]]], outstanding: int) -> None:
        self.name, self.lock, self.live, self.outstanding = name, threading.Lock(), _Live(booked, name), outstanding


class _Runs:
    """`RunBook.answered`'s part: a run is done once every spectrum it received was answered."""

    def answered(self, counts: list[tuple[_State, int]]) -> list[_State]:
        done = []
        for state, n in counts:
            state.outstanding -= n
            if state.outstanding == 0:
                done.append(state)
        return done


def test_a_report_whose_run_is_locked_waits_and_those_after_it_keep_their_order() -> None:
    async def scenario() -> None:
        booked: list[tuple[str, list[int]]] = []
        finished: list[str] = []
        a, b = _State("a", booked, 3), _State("b", booked, 1)
        book = ShedBook(_Runs(), lambda s: finished.append(s.name))  # type: ignore[arg-type]
        book.add(a, np.array([1]), np.array([500.0]), [], "overload")  # type: ignore[arg-type]
        assert booked == [("a", [1])] and len(book) == 0  # the lock was free: booked at once
        a.lock.acquire()  # the results thread builds run a's answers
        book.add(a, np.array([2, 3]), np.array([501.0, 502.0]), [], "overload")  # type: ignore[arg-type]
        book.add(b, np.array([7]), np.array([600.0]), [], "overload")  # type: ignore[arg-type]
        assert booked == [("a", [1])] and len(book) == 2  # the loop did not wait; b stays behind a
        await asyncio.sleep(5 * RETRY_S)
        assert len(book) == 2 and finished == []  # retried, a's lock still held
        a.lock.release()
        await asyncio.sleep(5 * RETRY_S)
        assert booked == [("a", [1]), ("a", [2, 3]), ("b", [7])] and finished == ["a", "b"] and len(book) == 0

    asyncio.run(scenario())


def test_at_shutdown_what_is_left_is_booked_waiting_for_the_lock() -> None:
    async def scenario() -> None:
        booked: list[tuple[str, list[int]]] = []
        a = _State("a", booked, 2)
        book = ShedBook(_Runs(), lambda s: None)  # type: ignore[arg-type]
        a.lock.acquire()
        book.add(a, np.array([4, 5]), np.array([1.0, 2.0]), [], "overload")  # type: ignore[arg-type]
        threading.Timer(0.05, a.lock.release).start()  # the results thread lets go a little later
        book.book(wait=True)
        assert booked == [("a", [4, 5])] and a.outstanding == 0 and len(book) == 0

    asyncio.run(scenario())
