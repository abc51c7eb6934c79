"""gateway.deadlines: one watcher thread per process runs each action at its deadline, unless cancelled."""

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from gateway import deadlines


def test_actions_run_in_deadline_order_not_watch_order():
    order: list[str] = []
    last = threading.Event()
    now = time.monotonic()
    deadlines.watch(now + 0.30, lambda: (order.append("c"), last.set()))
    deadlines.watch(now + 0.10, lambda: order.append("a"))
    deadlines.watch(now + 0.20, lambda: order.append("b"))
    assert last.wait(5)
    assert order == ["a", "b", "c"]


def test_a_sooner_deadline_wakes_a_watcher_waiting_for_a_later_one():
    far = deadlines.watch(time.monotonic() + 60, lambda: None)
    time.sleep(0.05)  # the watcher thread now waits for the far deadline
    hit = threading.Event()
    started = time.monotonic()
    handle = deadlines.watch(started + 0.1, hit.set)
    assert hit.wait(5)
    assert time.monotonic() - started < 1.0
    assert handle.fired
    assert far.cancel()


def test_a_cancelled_deadline_never_runs_its_action():
    ran = threading.Event()
    handle = deadlines.watch(time.monotonic() + 0.1, ran.set)
    assert handle.cancel() is True
    assert handle.cancel() is True  # idempotent
    marker = threading.Event()
    deadlines.watch(time.monotonic() + 0.2, marker.set)
    assert marker.wait(5)
    assert not ran.is_set()
    assert not handle.fired


def test_cancel_after_firing_says_so():
    ran = threading.Event()
    handle = deadlines.watch(time.monotonic(), ran.set)
    assert ran.wait(5)
    assert handle.fired
    assert handle.cancel() is False


def test_a_failing_action_does_not_stop_the_watcher(caplog):
    def boom():
        raise RuntimeError("boom")

    deadlines.watch(time.monotonic(), boom)
    after = threading.Event()
    deadlines.watch(time.monotonic() + 0.05, after.set)
    assert after.wait(5)
    assert any("deadline action failed" in r.getMessage() for r in caplog.records)


def test_an_action_may_watch_again():
    second = threading.Event()
    deadlines.watch(time.monotonic(), lambda: deadlines.watch(time.monotonic() + 0.05, second.set))
    assert second.wait(5)


def test_one_thread_per_process():
    for _ in range(50):
        deadlines.watch(time.monotonic() + 30, lambda: None).cancel()
    names = [t.name for t in threading.enumerate() if t.name == "deadlines"]
    assert len(names) == 1


def test_cancelled_entries_are_dropped_from_the_heap():
    handles = [deadlines.watch(time.monotonic() + 3600, lambda: None) for _ in range(deadlines.COMPACT_AFTER * 3)]
    before = deadlines.pending()
    for handle in handles:
        handle.cancel()
    assert deadlines.pending() == before - len(handles)
    watcher = deadlines._current()
    assert len(watcher._heap) < deadlines.COMPACT_AFTER * 2  # compacted, not kept until the hour passes


def test_shutdown_action_wakes_a_blocked_reader():
    a, b = socket.socketpair()
    try:
        handle = deadlines.watch(time.monotonic() + 0.1, deadlines.shutdown(a))
        started = time.monotonic()
        assert a.recv(10) == b""  # blocked until the watcher shut the read side
        assert time.monotonic() - started < 2
        assert handle.fired
    finally:
        a.close()
        b.close()
    deadlines.shutdown(a)()  # a closed socket: nothing raised


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_its_own_watcher():
    deadlines.watch(time.monotonic() + 30, lambda: None).cancel()  # the parent's thread exists
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread is not here; a watch must still fire
        try:
            hit = threading.Event()
            deadlines.watch(time.monotonic() + 0.05, hit.set)
            os.write(write_end, b"1" if hit.wait(5) else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        assert os.read(read_end, 1) == b"1"
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


def test_under_gevent_the_watcher_is_a_greenlet():
    """Patched before first use (as gunicorn's gevent worker does), the thread is a greenlet and fires while the
    only real thread sleeps in gevent."""
    script = textwrap.dedent(
        """
        from gevent import monkey
        monkey.patch_all()
        import threading, time, gevent
        from gevent import getcurrent
        from gateway import deadlines

        where = []
        record = lambda: where.append((type(getcurrent()).__name__, threading.get_native_id()))
        deadlines.watch(time.monotonic() + 0.05, record)
        gevent.sleep(0.5)
        # a spawned greenlet on this same OS thread, not a second OS thread
        assert where == [("Greenlet", threading.get_native_id())], where
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=os.getcwd())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")
