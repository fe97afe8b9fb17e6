"""CPU seconds of each step of ``rankscope diagnose`` on one tree, in one process (issue 35 item 3).

``uv run python benchmarks/tree_phases.py DIR``

Prints the process CPU time (all threads, user + system) of: the engine's imports, the walk
(``discover._walk_rel``), ``classify`` of every file, the sibling-name and rank-clash passes, reading every
file (``read.read_lines``), then a whole ``ingest`` (which walks, classifies and reads again, now with warm
caches) and ``diagnose`` of its table. The first walk and read pay the kernel's cold caches; the ingest after
them does not: the difference is what a second run of the command saves.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main(root: Path) -> None:
    clock = time.process_time
    t0 = clock()
    import correlator.api  # noqa: F401  # the engine, as the command loads it
    from correlator import discover, limits
    from correlator.diagnose import diagnose
    from correlator.ingest import ingest
    from correlator.read import read_lines

    t1 = clock()
    print(f"imports {t1 - t0:.2f}")
    files, _ = discover._walk_rel(root, False)
    t2 = clock()
    print(f"walk {t2 - t1:.2f} ({len(files)} files)")
    wcap = limits.current().max_world
    sources = [discover.classify(Path(p), root, size, rel=rel, wcap=wcap) for p, size, rel in files]
    t3 = clock()
    print(f"classify {t3 - t2:.2f}")
    sources, _ = discover.ranks_from_siblings(sources)
    discover._rank_clashes(sources)
    t4 = clock()
    print(f"siblings+clashes {t4 - t3:.2f}")
    lim = limits.current()
    for s in sources:
        read_lines(s.path, s.rel, None, lim)
    t5 = clock()
    print(f"read_lines {t5 - t4:.2f}")
    res = ingest(root)
    t6 = clock()
    print(f"ingest total {t6 - t5:.2f}")
    diagnose(res.table)
    print(f"diagnose {clock() - t6:.2f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
