"""Where a daemon's GIL time goes: a summary of `py-spy record --gil --threads --format raw` output.

Each line of the recording is one collapsed stack (``process;thread;frame;frame;... count``). Prints, for each
process and thread, its share of the samples, then its costliest functions by time spent inside them (inclusive)
and on their own (self). With ``--gil`` a sample is taken only from the thread holding its process's GIL, so a
process's shares say who holds its GIL, and for how long.

    python bench/spy_summary.py py-spy-main-50000.txt [--top 12] [--process daemon]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def frame_name(frame: str) -> str:
    """``func (path/file.py:123)`` as ``file.py:func`` (lines dropped, so one function counts once)."""
    m = _FRAME.match(frame.strip())
    if m is None:
        return frame.strip()
    return f"{Path(m['file']).name}:{m['func']}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recording", type=Path)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--process", default="", help="only processes whose command line contains this")
    args = ap.parse_args()
    per_thread: Counter[tuple[str, str]] = Counter()
    inclusive: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    own: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for line in args.recording.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        parts = stack.split(";")
        at = next((i for i, x in enumerate(parts) if x.startswith("thread (")), None)
        if at is None or args.process not in ";".join(parts[:at]):  # (one process, no --subprocesses: no prefix)
            continue
        procs = re.findall(r"process (\d+):", ";".join(parts[:at]))  # --subprocesses nests them: the innermost
        proc = f"process {procs[-1] if procs else '?'}"
        frames = [frame_name(f) for f in parts[at + 1 :]]
        if not frames:
            continue
        # spawned children run multiprocessing's main: named by the module whose ``serve`` they run
        name = next((f.split("_process.py")[0] for f in frames if f.endswith("_process.py:serve")), "daemon")
        key = (f"{proc} {name}", parts[at].split(": ", 1)[-1])
        count = int(n)
        per_thread[key] += count
        for f in set(frames):
            inclusive[key][f] += count
        own[key][frames[-1]] += count
    by_proc: Counter[str] = Counter()
    for (proc, _), n in per_thread.items():
        by_proc[proc] += n
    for key, n in sorted(per_thread.items(), key=lambda kv: (kv[0][0], -kv[1])):
        total = by_proc[key[0]]
        print(f"\n== {key[0]} / {key[1]}: {n} samples, {n / total:.0%} of its process's GIL-held samples")
        shown = [(f, k) for f, k in inclusive[key].most_common() if k < n][: args.top]  # not the frames all share
        print("   inclusive: " + "; ".join(f"{f} {k / n:.0%}" for f, k in shown))
        print("   self:      " + "; ".join(f"{f} {k / n:.0%}" for f, k in own[key].most_common(args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
