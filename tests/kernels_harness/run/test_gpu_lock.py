"""The per-GPU lock: shared holders together, a timer alone, and a waiting timer keeps new checks out."""
import threading
import time

from kernels_harness.run.timing import gpu_lock


def test_shared_holders_overlap_and_a_waiting_timer_goes_before_new_ones(tmp_path):
    path = str(tmp_path / "gpu0.lock")
    order = []
    with gpu_lock(path, shared=True):
        with gpu_lock(path, shared=True):  # two checks at once
            order.append("two shared")

        def timer():
            with gpu_lock(path):
                order.append("timer")
                time.sleep(0.2)

        t = threading.Thread(target=timer)
        t.start()
        time.sleep(0.1)  # the timer now waits for the first check, holding the turn

        def late_check():
            with gpu_lock(path, shared=True):
                order.append("late check")
        c = threading.Thread(target=late_check)
        c.start()
        time.sleep(0.1)
        assert order == ["two shared"]  # neither got in while the first check holds the GPU
    t.join()
    c.join()
    assert order == ["two shared", "timer", "late check"]


def test_a_nested_request_of_the_holding_thread_passes_even_with_a_timer_waiting(tmp_path):
    """torch.compile's first run of a graph takes the shared lock; inside the timed region (exclusive) or inside a
    check (shared, with another worker's timer waiting for the turn) asking again would wait for itself."""
    path = str(tmp_path / "gpu0.lock")
    order = []

    def timer():
        with gpu_lock(path):
            order.append("timer")
    with gpu_lock(path, shared=True):
        t = threading.Thread(target=timer)
        t.start()
        time.sleep(0.1)   # the other timer holds the turn now
        with gpu_lock(path, shared=True):
            order.append("nested shared")
    t.join(5)
    with gpu_lock(path), gpu_lock(path, shared=True), gpu_lock(path):
        order.append("nested in exclusive")
    assert order == ["nested shared", "timer", "nested in exclusive"]
    with gpu_lock(path):   # released: an exclusive holder can come in again
        order.append("again")
    assert order[-1] == "again"
