"""The daemon's run book when a run.end overtakes its run's last spectra (several intake processes)."""

from __future__ import annotations

from types import SimpleNamespace

from rtsearch.serve.runs import runs as book_module
from rtsearch.serve.runs.runs import RunBook
from tests.fakeclock import FakeClock


def _book(settle_s: float = 0.0) -> tuple[RunBook, FakeClock]:
    clock = FakeClock(1_000_000_000)
    # the book reads only a run's name of its LiveRun
    return RunBook(lambda name: SimpleNamespace(name=name), settle_s=settle_s, clock=clock), clock  # type: ignore[arg-type,return-value]


def test_spectra_after_an_early_run_end_join_the_run_until_n_spectra_came() -> None:
    book, clock = _book()
    first = book.state("r")
    book.received([(first, 3, 1)])  # 3 MS2 + 1 MS1 of the 6 the run.end will announce
    assert book.end("r", 6) is None  # not all arrived: not done, even with nothing outstanding yet
    assert book.answered([(first, 3)]) == []
    late = book.state("r")  # the two spectra the other intake still held
    assert late is first, "a spectrum the run.end announced belongs to the run, not to a new segment"
    book.received([(late, 2, 0)])
    assert book.answered([(late, 2)]) == [first]  # 6 of 6 received, all answered: done
    assert book.finish(first)
    again = book.state("r")  # a later spectrum of that name: a new segment
    assert again is not first


def test_a_run_end_announcing_more_than_ever_comes_ends_the_run_after_the_wait() -> None:
    book, clock = _book()
    state = book.state("r")
    book.received([(state, 2, 0)])
    book.answered([(state, 2)])
    assert book.end("r", 5) is None
    clock.advance(book_module.END_WAIT_S - 0.1)
    assert book.settled() == []
    clock.advance(0.2)
    assert book.settled() == [state]


def test_without_n_spectra_the_run_settles_after_its_last_message() -> None:
    book, clock = _book(settle_s=0.5)
    state = book.state("r")
    book.received([(state, 1, 0)])
    assert book.end("r", None) is None  # answered nothing yet
    clock.advance(0.3)
    assert book.state("r") is state  # within the settle time a late spectrum still joins
    book.received([(state, 1, 0)])
    assert book.answered([(state, 2)]) == []  # answered, but its last message came 0 s ago
    clock.advance(0.4)
    assert book.settled() == []
    clock.advance(0.2)
    assert book.settled() == [state]


def test_one_intake_keeps_the_immediate_end() -> None:
    book, _ = _book(settle_s=0.0)
    state = book.state("r")
    book.received([(state, 2, 0)])
    book.answered([(state, 2)])
    assert book.end("r", None) is state
    book2, _ = _book()
    s2 = book2.state("q")
    book2.received([(s2, 2, 0)])
    book2.answered([(s2, 2)])
    assert book2.end("q", 2) is s2


def test_shutdown_ends_runs_still_waiting_for_announced_spectra() -> None:
    book, _ = _book(settle_s=0.5)
    state = book.state("r")
    book.received([(state, 1, 0)])
    book.answered([(state, 1)])
    book.end("r", 10)
    assert book.ending_all() == [state]


def test_malformed_messages_are_not_counted_among_the_spectra_a_run_end_announced() -> None:
    """``n_spectra`` counts the run's spectra; a malformed message naming the run owes an answer but is not one of
    them. Counted (issue 67), 2 malformed + 1 valid of 3 announced ended the run, and its last valid spectra, still
    in another intake process, reopened it as a segment of their own."""
    book, _ = _book()
    state = book.state("r")
    book.received([(state, 1, 0)])
    book.malformed(state)
    book.malformed(state)
    assert book.end("r", 3) is None
    assert book.answered([(state, 3)]) == []  # all answered, but 2 of the 3 spectra announced have not come
    assert book.state("r") is state  # they join the run
    book.received([(state, 2, 0)])
    assert book.answered([(state, 2)]) == [state]
