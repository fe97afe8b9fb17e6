"""rankscope's correlation engine: ingest -> align -> graph -> diagnose -> report.

Python API::

    import correlator
    table = correlator.load("path/to/logs")        # polars DataFrame, schema in correlator.schema
    verdict = correlator.diagnose(table)            # correlator.diagnose.Diagnosis
    print(verdict.to_json())
    G = correlator.build_graph(table)               # networkx.DiGraph
    result = correlator.diagnose_path("path/to/logs")   # correlator.api.PathDiagnosis: what the CLI prints
    print(result.to_json())                         # == `rankscope diagnose path/to/logs -f json`
    job = correlator.open_job("path/to/logs")       # the facade every command uses: one verdict per job
    job.diagnose(); job.graph(); job.trace()        # the verdict, its causal graph, its Perfetto trace

The names above are loaded on first use: ``import correlator`` (and so every ``rankscope`` command, whose
``correlator.cli`` sits in this package) does not load polars, pyarrow or networkx until something needs
them, so that ``rankscope --version`` and ``--help`` start at once (issue #32 item 3).
"""

# First, before polars is loaded by anything below: polars' allocator returns freed pages sooner.
from correlator import allocator  # noqa: F401  # isort: skip

import sys
import types
from typing import TYPE_CHECKING, Any

# What the names are, for type checkers; at run time they load on first use (_Package below), which is why
# ruff's TC004 ("used at run time", in __all__) does not apply.
if TYPE_CHECKING:
    from correlator import streaming  # noqa: TC004
    from correlator.api import InputError, PathDiagnosis, diagnose_path  # noqa: TC004
    from correlator.diagnose import diagnose  # noqa: TC004
    from correlator.graph import build_graph  # noqa: TC004
    from correlator.ingest import IngestResult, ingest, load  # noqa: TC004
    from correlator.job import Job, open_job  # noqa: TC004
    from correlator.verdict import Diagnosis  # noqa: TC004

#: Public name -> (the module that defines it, the name there; None: the module itself).
_LAZY: dict[str, tuple[str, str | None]] = {
    "Diagnosis": ("correlator.verdict", "Diagnosis"),
    "IngestResult": ("correlator.ingest", "IngestResult"),
    "Job": ("correlator.job", "Job"),
    "open_job": ("correlator.job", "open_job"),
    "InputError": ("correlator.api", "InputError"),
    "PathDiagnosis": ("correlator.api", "PathDiagnosis"),
    "build_graph": ("correlator.graph", "build_graph"),
    "diagnose": ("correlator.diagnose", "diagnose"),
    "diagnose_path": ("correlator.api", "diagnose_path"),
    "ingest": ("correlator.ingest", "ingest"),
    "load": ("correlator.ingest", "load"),
    "streaming": ("correlator.streaming", None),
}


def _load_name(name: str) -> Any:
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    return module if attr is None else getattr(module, attr)


class _Package(types.ModuleType):
    """This package's module type (the Python reference, "Customizing module attribute access").

    ``diagnose`` and ``ingest`` are both a submodule and the function of that submodule exported here. When
    a submodule is first imported, Python binds it as an attribute of the package, which would hide the
    function of the same name (``correlator.diagnose(table)`` would call a module). As properties with a
    setter that ignores that binding, the two names stay the functions, as they were when this file
    imported them eagerly; the modules stay reachable in ``sys.modules``."""

    @property
    def diagnose(self) -> Any:
        return _load_name("diagnose")

    @diagnose.setter
    def diagnose(self, value: Any) -> None:
        pass  # the import system binding the submodule correlator.diagnose: the name stays the function

    @property
    def ingest(self) -> Any:
        return _load_name("ingest")

    @ingest.setter
    def ingest(self, value: Any) -> None:
        pass  # as for diagnose

    def __getattr__(self, name: str) -> Any:  # called only for names not yet bound
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = _load_name(name)
        setattr(self, name, value)
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(_LAZY))


sys.modules[__name__].__class__ = _Package

__all__ = [
    "Diagnosis",
    "IngestResult",
    "InputError",
    "Job",
    "PathDiagnosis",
    "build_graph",
    "diagnose",
    "diagnose_path",
    "ingest",
    "load",
    "open_job",
    "streaming",
]
