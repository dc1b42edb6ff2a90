"""Timer's stream join on a simulated device (no GPU): the joined times are reported for a kernel on the
candidate's stream, the device-synchronised ones when work ran on another stream, and join="device"
keeps the old protocol."""
import random
import types

import pytest

from kernels_harness.run.timing import Timer

WAKE = (0.004, 0.030)  # the host's wake-up after deviceSynchronize + the next record, ms: load-dependent


class _Device:
    """A clock in ms; the harness stream, the legacy stream and one side stream, each done at some time."""

    def __init__(self, seed=0):
        self.now, self.stream_done, self.legacy_done, self.side_done = 0.0, 0.0, 0.0, 0.0
        self.rng = random.Random(seed)


def _fake_cp(dev: _Device):
    class Event:
        def __init__(self, disable_timing=False):
            self.t = None
            self.ptr = id(self)

        def record(self, stream):  # on the harness stream: after its queued work
            self.t = dev.stream_done = max(dev.stream_done, dev.now)

        def synchronize(self):
            dev.now = max(dev.now, self.t)

    events = {}

    def stream_wait_event(stream, ptr, flags):
        assert stream == 1  # cudaStreamLegacy
        dev.legacy_done = max(dev.legacy_done, events[ptr].t)

    def event_record(ptr, stream):
        assert stream == 1
        events[ptr].t = dev.legacy_done = max(dev.legacy_done, dev.now)

    def device_synchronize():
        dev.now = max(dev.now, dev.stream_done, dev.legacy_done, dev.side_done) + dev.rng.uniform(*WAKE)

    def make_event(disable_timing=False):
        e = Event(disable_timing)
        events[e.ptr] = e
        return e

    runtime = types.SimpleNamespace(streamWaitEvent=stream_wait_event, eventRecord=event_record,
                                    deviceSynchronize=device_synchronize)
    cuda = types.SimpleNamespace(Event=make_event, runtime=runtime, get_elapsed_time=lambda a, b: b.t - a.t)
    return types.SimpleNamespace(cuda=cuda)


def _timer(dev, join="auto"):
    def flush():
        dev.stream_done = max(dev.stream_done, dev.now) + 0.04  # ~40 us of L2 flush on the stream
    be = types.SimpleNamespace(cp=_fake_cp(dev), stream="harness")
    return Timer(be, flush, join=join)


def _on_stream(dev, ms):
    def call():
        dev.stream_done = max(dev.stream_done, dev.now) + ms
        return 0
    return call


def _on_legacy(dev, ms):  # `k<<<g, b>>>` without the stream argument
    def call():
        dev.legacy_done = max(dev.legacy_done, dev.now) + ms
        return 0
    return call


def _on_side_stream(dev, ms):  # a stream of its own, started at once
    def call():
        dev.side_done = max(dev.side_done, dev.now) + ms
        return 0
    return call


def test_joined_times_drop_the_host_wake_up():
    dev = _Device()
    timer = _timer(dev)
    res = timer.measure([_on_stream(dev, 0.030), _on_legacy(dev, 0.050)], min_reps=20, budget_s=1.0)
    assert timer.gap_limit_ms is not None and 0.02 < timer.gap_limit_ms < 0.15
    assert [r["join"] for r in res] == ["stream", "stream"]
    assert res[0]["median_ms"] == pytest.approx(0.030, abs=1e-9)  # exactly the kernel: no host jitter in it
    assert res[0]["iqr_ms"] == pytest.approx(0.0, abs=1e-9)
    assert res[1]["median_ms"] == pytest.approx(0.050, abs=1e-9)
    dev = _Device()
    old = _timer(dev, join="device").measure([_on_stream(dev, 0.030)], min_reps=20, budget_s=1.0)[0]
    assert old["join"] == "device" and old["median_ms"] > 0.030 + WAKE[0]  # the wake-up is in the old times


def test_work_on_another_stream_falls_back_to_the_device_wide_time():
    dev = _Device()
    timer = _timer(dev)
    res = timer.measure([_on_side_stream(dev, 1.0)], min_reps=20, budget_s=1.0)[0]
    assert res["join"] == "device"
    # the side work started with the call, while the stream still flushed L2 (40 us before `start`)
    assert res["median_ms"] >= 1.0 - 0.04 and res["sync_gap_ms"] > timer.gap_limit_ms


def _jittery(dev, ms, jitter):
    def call():
        dev.stream_done = max(dev.stream_done, dev.now) + ms + dev.rng.uniform(0, jitter)
        return 0
    return call


def test_a_few_microsecond_kernel_stops_at_the_event_resolution_not_the_budget():
    dev = _Device()
    timer = _timer(dev)
    # 3 us with 0.4 us of jitter: its IQR (~0.2 us) is >2% of the median but under the 0.5 us resolution
    fast = timer.measure([_jittery(dev, 0.003, 0.0004)], min_reps=10, max_reps=300, budget_s=10.0)[0]
    assert fast["reps"] == 10 and 0.003 <= fast["median_ms"] <= 0.0034
    strict = timer.measure([_jittery(dev, 0.003, 0.0004)], min_reps=10, max_reps=300, budget_s=10.0,
                           min_iqr_ms=0.0)[0]
    assert strict["reps"] == 300  # the relative target alone: never met, the budget or max_reps ends it
    # a 50 us kernel with 3 us of jitter is held to 2% of its median, above the floor: more repetitions
    slow = timer.measure([_jittery(dev, 0.050, 0.003)], min_reps=10, max_reps=300, budget_s=10.0)[0]
    assert slow["reps"] > 10


def test_join_mode_is_checked():
    with pytest.raises(ValueError, match="join"):
        _timer(_Device(), join="stream")
    with pytest.raises(ValueError, match="join"):
        _timer(_Device()).measure([lambda: 0], join="none")


def test_the_pool_joins_streams_only_where_stream_creation_is_rejected():
    from kernels_harness import hacks
    from kernels_harness.run import HarnessPool
    kw = {"workers": 1, "compile_workers": 1, "features": False}
    with HarnessPool("cpu", **kw) as pool:
        assert pool._streams_checked
    for extra in ({"checks": False}, {"rules": hacks.Rules.make(disabled=["stream"])},
                  {"rules": hacks.Rules.make(allow=["cudaStreamCreate"])}):
        with HarnessPool("cpu", **kw, **extra) as pool:  # every stream drained in the timed region
            assert not pool._streams_checked


def test_a_slow_call_sends_a_heartbeat_between_repetitions_so_each_gets_the_call_limit():
    import time
    dev = _Device()
    timer = _timer(dev, join="device")
    beats = []

    def slow():  # 0.25 s of host time per call (a candidate that takes long on a large config)
        time.sleep(0.25)
        return _on_stream(dev, 1.0)()
    t0 = time.monotonic()
    res = timer.measure([slow], warmup=1, min_reps=5, budget_s=0.0, heartbeat=lambda: beats.append(time.monotonic()))
    assert res[0]["reps"] == 5
    # 6 calls in 1.5 s: a beat once half a second has passed, before a call, so no call starts more than 0.5 s after
    # the last message (the pool's call limit restarts at each one)
    assert len(beats) >= 2 and all(b - a < 1.0 for a, b in zip([t0] + beats, beats))
    fast = []
    timer.measure([_on_stream(dev, 0.03)], min_reps=5, budget_s=0.0, heartbeat=lambda: fast.append(1))
    assert fast == []  # calls that end at once: no messages in between


def test_timing_params_are_checked_and_become_the_timers_keywords():
    from kernels_harness.run.timing import TimingParams
    with pytest.raises(ValueError, match="min_reps"):
        TimingParams(min_reps=5, max_reps=2)
    p = TimingParams(warmup=1, min_reps=2, budget_s=0.02)
    dev = _Device()
    res = _timer(dev).measure([_on_stream(dev, 0.03)], **p.as_kwargs())[0]
    assert 2 <= res["reps"] <= p.max_reps


def test_max_s_ends_the_timing_of_a_slow_call_after_one_timed_repetition():
    import time
    dev = _Device()
    timer = _timer(dev, join="device")

    def slow():  # 0.1 s a call: warmup 3 + min_reps 10 would hold the GPU 1.3 s
        time.sleep(0.1)
        return _on_stream(dev, 100.0)()
    t0 = time.monotonic()
    res = timer.measure([slow, _on_stream(dev, 1.0)], warmup=3, min_reps=10, max_s=0.25)
    assert time.monotonic() - t0 < 0.9
    assert [r["reps"] for r in res] == [1, 1] and res[0]["median_ms"] >= 100.0
    full = timer.measure([_on_stream(dev, 1.0)], warmup=3, min_reps=10, budget_s=0.0, max_s=5.0)[0]
    assert full["reps"] == 10  # fast calls: the cap never binds
