"""Progress of a decode loop that runs inside jit: a host callback every few steps drives a tqdm bar.

    with DecodeProgress("turn 0", max_steps=512, batch=8) as bar:     # what Sampler.generate_tokens does
        ... _decode(..., progress_every=16, progress_id=bar.id) ...   # the loop calls report() every 16 steps

The compiled decode loop calls `report(progress_id, step, tokens, active)` through `jax.debug.callback` (unordered)
every `progress_every` steps, only when the program was built with progress on (a static argument: programs without
progress are unchanged and never call the host). `report` finds the bar by its id and moves it: step of the most
`max_steps`, tokens generated so far by the whole batch, tokens/s since the call began, and the samples still
running; tqdm's ETA assumes the loop runs to `max_steps` (an upper bound: it stops once every sample has ended).
"""
from __future__ import annotations

import itertools
import sys
import threading
import time

_BARS: dict[int, DecodeProgress] = {}
_IDS = itertools.count(1)
_LOCK = threading.Lock()


def report(progress_id, step, tokens, active) -> None:
    """The host end of the decode loop's callback (int32 scalars); never raises into the program."""
    bar = _BARS.get(int(progress_id))
    if bar is None:
        return
    try:
        bar.update(int(step), int(tokens), int(active))
    except Exception:  # noqa: BLE001, S110 - a display problem must not stop generation
        pass


class DecodeProgress:
    """A tqdm bar over the decode steps of one sampler call; a context manager that registers it for `report`."""

    def __init__(self, label: str, max_steps: int, batch: int, *, file=None, leave: bool = False):
        from tqdm.auto import tqdm
        with _LOCK:
            self.id = next(_IDS)
        self.max_steps, self.batch = int(max_steps), int(batch)
        self.t0 = time.perf_counter()
        self.tokens = 0
        self.bar = tqdm(total=self.max_steps, desc=label, unit="step", leave=leave, file=file or sys.stderr,
                        dynamic_ncols=True, mininterval=0.5)

    def __enter__(self):
        _BARS[self.id] = self
        return self

    def update(self, step: int, tokens: int, active: int) -> None:
        self.tokens = tokens
        rate = tokens / max(time.perf_counter() - self.t0, 1e-9)
        self.bar.set_postfix_str(f"{rate:.1f} tok/s, {active}/{self.batch} running", refresh=False)
        self.bar.update(max(0, step - self.bar.n))

    def finish(self, steps: int, tokens: int) -> None:
        """The final count, drawn (the loop's last steps fall after the last report): `steps` decode steps ran (the
        longest sample's length), `tokens` generated in all."""
        self.update(steps, tokens, 0)
        self.bar.refresh()

    def __exit__(self, *exc) -> None:
        _BARS.pop(self.id, None)
        self.bar.close()
