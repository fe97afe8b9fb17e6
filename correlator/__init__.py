"""rankscope's correlation engine: ingest -> align -> graph -> diagnose -> report.

Python API::

    import correlator
    table = correlator.load("path/to/logs")        # polars DataFrame, schema in correlator.schema
    verdict = correlator.diagnose(table)            # correlator.diagnose.Diagnosis
    print(verdict.to_json())
    G = correlator.build_graph(table)               # networkx.DiGraph
    result = correlator.diagnose_path("path/to/logs")   # correlator.api.PathDiagnosis: what the CLI prints
    print(result.to_json())                         # == `rankscope diagnose path/to/logs -f json`
"""

# First, before polars is loaded by anything below: polars' allocator returns freed pages sooner.
from correlator import allocator  # noqa: F401  # isort: skip

from correlator import streaming
from correlator.api import InputError, PathDiagnosis, diagnose_path
from correlator.diagnose import Diagnosis, diagnose
from correlator.graph import build_graph
from correlator.ingest import IngestResult, ingest, load

__all__ = [
    "Diagnosis",
    "IngestResult",
    "InputError",
    "PathDiagnosis",
    "build_graph",
    "diagnose",
    "diagnose_path",
    "ingest",
    "load",
    "streaming",
]
