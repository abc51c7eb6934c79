"""json-repair's child process: json-repair run with limits on its memory and CPU time (its parent, in
plugins.common.repair, kills it at its deadline). Imports nothing of Django: the forkserver loads it bare; json-repair
is imported in the child (the forkserver preloads it), not in the worker."""

from __future__ import annotations

import json
import resource
from multiprocessing.connection import Connection

REPAIR_MEMORY = 256 * 1024 * 1024


def repair_child(sender: Connection[tuple[str, str], object], candidate: str, seconds: float) -> None:
    with open("/proc/self/statm") as statm:  # Linux: the address space it starts with (the limit is on top of it)
        size = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + REPAIR_MEMORY, size + REPAIR_MEMORY))
    cpu = int(seconds) + 2  # a backstop: the parent kills the child at its deadline
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    import json_repair

    try:
        sender.send(("ok", json.dumps(json_repair.loads(candidate))))
    except (ValueError, RecursionError) as error:  # json.dumps: a value nested too deep to pass back
        sender.send(("error", str(error)[:200]))
    except MemoryError:
        sender.send(("error", "out of memory"))
    finally:
        sender.close()
