"""json-repair bounded in time and memory: a child process (plugins.common.repair_child, forked by the
forkserver) killed at its deadline. The response-healing plugin repairs answers with it, the fusion analysis the
analyst's JSON."""

import json
import multiprocessing
import threading

from plugins.common.repair_child import repair_child

# json-repair's time is not linear in the text (`{` * 100 + "a" * 5000 takes ~8 s, 150 kB of that shape minutes):
# it runs in a child process, killed at REPAIR_SECONDS.
REPAIR_SECONDS = 2.0
MAX_CONCURRENT_REPAIRS = 4  # per worker process


class RepairTooSlow(Exception):
    """json-repair did not finish within REPAIR_SECONDS (its child was killed)."""


_context = multiprocessing.get_context("forkserver")
_slots = threading.BoundedSemaphore(MAX_CONCURRENT_REPAIRS)


def repair_bounded(candidate: str) -> object:
    """json_repair.loads(candidate) run in a child limited in time and memory: ValueError when it finds no JSON,
    RepairTooSlow when it runs out of time (or its slot never frees)."""
    seconds = REPAIR_SECONDS
    if not _slots.acquire(timeout=seconds):
        raise RepairTooSlow
    receiver, sender = _context.Pipe(duplex=False)
    child = _context.Process(target=repair_child, args=(sender, candidate, seconds), daemon=True)
    try:
        child.start()
        sender.close()
        if not receiver.poll(seconds):
            raise RepairTooSlow
        kind, value = receiver.recv()
    except EOFError:  # the child died (a memory or CPU limit)
        raise RepairTooSlow from None
    finally:
        sender.close()
        receiver.close()
        if child.is_alive():
            child.kill()
        child.join()
        child.close()
        _slots.release()
    if kind != "ok":
        raise ValueError(value)
    return json.loads(value)
