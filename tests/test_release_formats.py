"""Lines whose format changed across torch releases, each a real line from a capture of
``fixtures/capture/releases.py`` (the case named in each test; docs/log-formats.md §9)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import correlator


def _events(tmp_path: Path, text: str, name: str = "combined.log") -> pl.DataFrame:
    (tmp_path / name).write_text(text + "\n")
    return correlator.load(tmp_path)


def test_torch_2_0_detail_mismatch_has_no_sequence_number(tmp_path: Path) -> None:
    # cap-t201-mismatch-detail-r1, rank 2's stderr (torch 2.0.1, TORCH_DISTRIBUTED_DEBUG=DETAIL): the
    # fingerprint starts with OpType, and the other rank's fingerprint is only its OpType.
    line = (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 2 is running collective: "
        "CollectiveFingerPrint(OpType=ALLREDUCE, TensorShape=[], TensorDtypes=Float, "
        "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), "
        "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))), but Rank 1 is "
        "running collective: CollectiveFingerPrint(OpType=BROADCAST)."
    )
    row = _events(tmp_path, line).row(0, named=True)
    want = {"kind": "collective_mismatch", "op": "ALLREDUCE", "seq": None, "shape": "[]", "peer_rank": 1}
    assert {k: row[k] for k in want} == want
    assert row["peer_op"] == "BROADCAST"


def test_gloo_size_enforce_without_explanation_before_2_5(tmp_path: Path) -> None:
    # cap-t241-shape-plain-r1, rank 0 (torch 2.4.1; 2.0.1 prints the same at pair.cc:510): the bystander that
    # received rank 1's wider gradient aborts; older gloo has no "Received data size doesn't match" text.
    text = (
        "[default0]:terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
        "[default0]:  what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] "
        "op.preamble.length <= op.nbytes. 384 vs 256"
    )
    t = _events(tmp_path, text)
    assert t.select("local_rank", "layer", "kind", "severity").rows() == [
        (0, "c10d", "collective_mismatch", "error")
    ]
