"""Progress bars (tqdm behind `rtsearch.cli.progress.Progress`): drawn on a terminal, silent elsewhere."""

from __future__ import annotations

import io

from rtsearch.cli.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal_counts_to_its_total_learned_late() -> None:
    out = Terminal()
    with Progress("digest", unit="proteins", stream=out) as bar:
        bar.update(1500)
        bar.set(4324, total=4324)
        assert bar.done == 4324
    text = out.getvalue()
    assert "digest" in text and "100%" in text and "4.32k/4.32k" in text


def test_silent_when_not_a_terminal() -> None:
    out = io.StringIO()
    with Progress("search", total=10, stream=out) as bar:
        bar.update(10)
    assert out.getvalue() == ""
