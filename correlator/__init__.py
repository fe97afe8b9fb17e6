"""rankscope's correlation engine: ingest -> align -> graph -> diagnose -> report.

Python API::

    import correlator
    table = correlator.load("path/to/logs")        # polars DataFrame, schema in correlator.schema
    verdict = correlator.diagnose(table)            # correlator.diagnose.Diagnosis
    print(verdict.to_json())
    G = correlator.build_graph(table)               # networkx.DiGraph
"""

from correlator import streaming
from correlator.diagnose import Diagnosis, diagnose
from correlator.graph import build_graph
from correlator.ingest import IngestResult, ingest, load

__all__ = ["Diagnosis", "IngestResult", "build_graph", "diagnose", "ingest", "load", "streaming"]
