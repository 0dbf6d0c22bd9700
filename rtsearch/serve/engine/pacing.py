"""When a cluster's engine threads take their next batch: just before a worker is free, not as soon as they are.

With `CLUSTER_DEPTH` batches in flight a worker, its GPU does not wait while the daemon hands
on one batch's answers and gathers, pickles and sends the next (one batch in flight: the workers scored 0.64-0.72
of the time at 500 Da, two: 0.93-0.99). But a thread that took whatever waited as soon as it was free sent a batch
of a few spectra to queue behind the one being scored, and the fixed cost of a batch was paid again and again: two
workers with two threads each scored batches of 6.7 spectra (9.4 ms, most of it the fixed cost) at 2,000 /s, the
GPUs 0.62 busy on them and the door shedding (docs/history/RESULTS.md, 2026-11-26 21:10). So while every worker ("lane":
each worker in replicate mode; the batch's one spread over all of them in partition mode) holds a batch, a free
thread waits until its lane is predicted free, less the daemon's own time a batch (`HostTime`: gathering,
sending, handing on the answers — the batch's time less its worker's) and `LEAD_MS`, and takes what came meanwhile.
Each engine thread keeps to one lane (replicate: thread k scores on worker k mod N), so that what is predicted of a
lane is what its worker does. With two workers and two in flight each the daemon's own cost a batch, not the GPUs,
was the limit at 200 Da (batches of 5 spectra, shed: docs/history/RESULTS.md, 2026-11-26 21:42) until `worth_rule`:
behind a batch in flight, a lane takes the next only when it is worth its fixed cost, else waits for the lane to be
free::

    worker   ········ ████ batch 1 ██████████ ████ batch 2 ███████
    thread A take 1 ─ sent ─ waits ─────────── back, answers out ▏ free ── holds ──▏ take 3 ...
    thread B          free ── holds ─── take 2 ─ sent ─ queued ▏▏ (taken the daemon's own time before 1 ends)

Pure: times are the caller's clock, in ns.
"""

from __future__ import annotations

from rtsearch.config.environment import tuning
from rtsearch.serve.engine.batching import EngineTimeModel

LEAD_MS = 1.0  # the next batch is taken this much earlier still (the prediction's error)
# the worth rule waits at most until the first spectrum waiting has spent this share of its budget: where a slow host
# inflated the engine-time model's fixed cost, the rule held spectra nearly to their deadline with the GPU half idle
# (p99 = the budget; docs/history/RESULTS.md, 2026-11-27 00:10)
PATIENCE = 0.25
HOST_HALFLIFE = 16  # batches: `HostTime`'s smoothing
# batches in flight a lane: with one its GPU waits while the daemon hands on the answers and sends the
# next (busy 0.56-0.72); two, the next taken just in time and only when worth its fixed cost (`pacing.worth_rule`):
# p99 <= 50 ms capacity at 200 Da x1.8 for one worker, x1.3 / x2.0 for two replicate / partition
# (docs/history/RESULTS.md, 2026-11-27 00:00). The ``cluster_depth`` knob sets it. Lanes sharing the workers each keep
# CLUSTER_DEPTH // lanes (at least 1): two lanes of two pieces on two H200s at 200 Da, one a lane, scored 13,162 /s
# where two a lane shed and scored 11,182 (docs/history/RESULTS.md, 2026-11-27 07:23)
CLUSTER_DEPTH = 2


def lead_ns() -> int:
    """`LEAD_MS` (or the ``cluster_lead_ms`` knob, `rtsearch.config.environment`), in ns."""
    given = tuning().cluster_lead_ms
    return int((LEAD_MS if given is None else given) * 1e6)


def depth(sharing: int | None = None) -> int:
    """A lane's batches in flight a worker: `CLUSTER_DEPTH`, split between ``sharing`` lanes sharing the workers (at
    least 1), or the ``cluster_depth`` knob."""
    given = tuning().cluster_depth
    if given is not None:
        return given
    return max(1, CLUSTER_DEPTH // sharing) if sharing else CLUSTER_DEPTH


def worth_rule() -> bool:
    """Behind a batch in flight, a lane's next batch waits to be worth its fixed cost (`Lanes.hold_ns`); off with
    ``RTSEARCH_CLUSTER_WORTH=0``. On the GPU machine (docs/history/RESULTS.md, 2026-11-27 00:00, same call) it raised
    the p99 ≤ 50 ms capacity at 200 Da of one worker from 6,000 to 11,000 /s, of two replicate from 6,000 to 7,991, of
    two partition from 4,000 to 8,000 (with two in flight a lane for all)."""
    return tuning().cluster_worth is not False


def give_up_behind() -> bool:
    """Whether an engine thread gives up, before it takes a batch, what that batch would answer late behind its
    worker's (`rtsearch.serve.engine.expiry.Expiry._give_up_behind`); on with ``RTSEARCH_GIVE_UP_BEHIND=1``. Off: on two
    H100s it helped partition on two GPUs in one run and hurt replicate and one-GPU partition in others, each side
    one run against run-to-run spreads as wide (docs/history/RESULTS.md, 2026-11-27 16:55); on the pacing fake it scored
    5-12 % fewer spectra for a max latency 40-46 ms against 42-53."""
    return tuning().give_up_behind is True


def patience() -> float:
    """`PATIENCE`, or the ``cluster_patience`` knob (1: until the deadline's flush)."""
    given = tuning().cluster_patience
    return PATIENCE if given is None else given


class HostTime:
    """The daemon's own seconds a cluster batch (its time less its wait and work at its worker), smoothed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._decay = 0.5 ** (1 / HOST_HALFLIFE)
        self._seen = False

    def observe(self, batch_s: float, queued_s: float, scoring_s: float) -> None:
        own = max(0.0, batch_s - queued_s - scoring_s)
        self.seconds = own if not self._seen else self._decay * self.seconds + (1 - self._decay) * own
        self._seen = True


class Lanes:
    """A cluster's batches in flight by lane: ``due`` (the pool's: when each batch is predicted to leave, clock ns,
    by its number) is read and written here; which lane each is on, and which batch it queues behind."""

    def __init__(self, lanes: int, lead: int, *, worth: bool = False) -> None:
        self.lanes, self.lead, self.host, self.worth = lanes, lead, HostTime(), worth
        self.lane_of: dict[int, int] = {}
        self.behind: dict[int, int] = {}
        self.chained: set[int] = set()  # batches booked behind their lane's own (until they leave)

    def _last(self, due: dict[int, int], lane: int) -> int | None:
        """The number of ``lane``'s batch in flight predicted to leave last (``None``: it holds none)."""
        return max((m for m, k in self.lane_of.items() if k == lane and m in due), key=due.__getitem__, default=None)

    def free_at(self, due: dict[int, int], lane: int, now: int) -> int:
        """When a batch taken now could start on ``lane``: when its last batch in flight is predicted to leave (now
        when it holds none)."""
        last = self._last(due, lane)
        return now if last is None else max(now, due[last])

    def earliest(self, due: dict[int, int], now: int) -> int:
        """When a batch taken now could start on the first lane free."""
        return min(self.free_at(due, lane, now) for lane in range(self.lanes))

    def hold_ns(self, due: dict[int, int], lane: int, now: int, waiting: int = 1, full: int = 2**62,
                model: EngineTimeModel | None = None, *, patient_until: int = 2**62) -> int:  # fmt: skip
        """How long a free engine thread of ``lane`` waits before taking its batch (0: take it now; so too with
        nothing ``waiting`` or a ``full`` batch waiting). With `worth` (`worth_rule`), fewer spectra waiting than
        ``model``'s fixed cost over its cost a spectrum wait, while a batch is in flight — behind its lane's own, for
        the lane to be free; on a free lane, for the other lanes' last batch to come back (two replicate workers each
        took batches of 6-8 spectra at 2,000 /s, and the daemon's cost a batch shed a quarter: docs/history/RESULTS.md,
        2026-11-27) — but not past ``patient_until`` (`PATIENCE`: the batcher's `aged_at`; then a free lane takes
        them rather than one behind its own batch); a cluster with nothing in flight takes them at once."""
        if not 0 < waiting < full:
            return 0
        free = self.free_at(due, lane, now)
        if self.worth and model is not None and waiting * model.per_item_s < model.fixed_s:
            if free <= now:  # a free lane: until the others' last batch is back, or its patience runs out
                return max(0, min(max(due.values(), default=now), patient_until) - now)
            # behind its lane's own: its patience over, it takes them only if no other lane is free to
            others_busy = all(self.free_at(due, k, now) > now for k in range(self.lanes) if k != lane)
            return max(0, (min(free, patient_until) if others_busy else free) - now)
        return max(0, free - self.lead - int(self.host.seconds * 1e9) - now)

    def book(self, due: dict[int, int], number: int, lane: int, took: int, now: int) -> None:
        """Enter batch ``number``, taken at ``now`` for ``lane``, ``took`` ns the model's time of it: at once on a
        free lane; else after the lane's last batch, its trip there (the daemon's own time) overlapping that one."""
        ahead = self._last(due, lane)
        start = now if ahead is None else due[ahead] - int(self.host.seconds * 1e9)
        due[number] = max(now, start) + took
        self.lane_of[number] = lane
        if ahead is not None and start > now:
            self.behind[number] = ahead
            self.chained.add(number)

    def own_wait(self, number: int) -> bool:
        """Whether batch ``number`` (in flight) was booked behind its lane's own batch: its wait at its worker was
        predicted (`book`), not a cost the lane's predictions must learn — as a wait behind another lane's batch at
        workers the lanes share is (learnt as the lane's engine time, or its batches are predicted early)."""
        return number in self.chained

    def settle(self, due: dict[int, int], number: int, now: int) -> None:
        """Batch ``number`` came back at ``now``: those queued behind it (and behind them) move by how far off its
        predicted end was — predictions chained on predictions would keep an early error for ever — and it
        leaves."""
        late = now - due.pop(number, now)
        self.lane_of.pop(number, None)
        self.chained.discard(number)
        self.behind.pop(number, None)
        after = [m for m, k in self.behind.items() if k == number]
        for m in after:  # running now
            del self.behind[m]
        while after:
            m = after.pop()
            if m in due:
                due[m] += late
            after.extend(j for j, k in self.behind.items() if k == m)
