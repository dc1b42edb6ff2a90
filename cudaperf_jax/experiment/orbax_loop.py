"""Orbax restores that leave nothing running behind them.

    with finishing_reads():
        state = manager.restore(step, args=...)      # a damaged checkpoint raises here, and only here

Orbax runs each restore on a fresh asyncio event loop (`asyncio_utils.run_sync`) and reads the arrays with
`asyncio.gather`. When one read fails (a truncated, missing or overwritten file), gather raises at once and Orbax
closes the loop while the other reads are still pending: their coroutines are destroyed later ("Exception ignored
in: <coroutine object _read_array_index_and_device_put>") and TensorStore, finishing them, calls back into the closed
loop ("RuntimeError: Event loop is closed", reported as an unraisable exception at some later point). Inside this
context the loops Orbax creates first finish every task still pending on them (each read ends, ok or failed) and then
close, so a damaged checkpoint gives one exception and nothing after it.
"""
from __future__ import annotations

import asyncio
import contextlib
import threading

_LOCK = threading.Lock()


class _FinishingLoop(asyncio.SelectorEventLoop):
    """An event loop that runs its pending tasks to completion (results and errors dropped) before it closes."""

    def close(self) -> None:
        if not self.is_closed() and not self.is_running():
            pending = [t for t in asyncio.all_tasks(self) if not t.done()]
            if pending:
                self.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        super().close()


class _Policy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self):
        return _FinishingLoop()


@contextlib.contextmanager
def finishing_reads():
    """Event loops created in this block (by Orbax, on this or any thread) finish their tasks before closing."""
    with _LOCK:
        old = asyncio.get_event_loop_policy()
        asyncio.set_event_loop_policy(_Policy())
        try:
            yield
        finally:
            asyncio.set_event_loop_policy(old)
