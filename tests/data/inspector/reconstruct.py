# ruff: noqa: UP031  (printf-style on purpose: the strings follow the plugin's own C output)
"""Write the RECONSTRUCTED NCCL Inspector logs of this folder as NVIDIA/nccl's profiler plugin writes them
(``plugins/profiler/inspector`` at commit 5067397, NCCL 2.30.7, output format v4.0): one file per process,
``<hostname>-pid<pid>.log`` (``inspector.cc``: ``"%s/%s-pid%d.log"``) in ``nccl-inspector-unknown-jobid/``, one
compact JSON object per completed collective (``json.cc``: ``"\\"%s\\":"`` keys, ``","`` separators, ``%lf``
doubles, a newline per record; ``inspector_json.cc``: header ``id``, ``comm_name``, ``rank``, ``n_ranks``,
``nnodes``; metadata ``inspector_output_format_version``, ``git_rev``, ``rec_mechanism``, ``dump_timestamp_us``,
``hostname``, ``pid``; ``coll_perf`` ``coll``, ``coll_sn``, ``coll_msg_size_bytes``, ``coll_exec_time_us``,
``coll_timing_source``, ``coll_algobw_gbs``, ``coll_busbw_gbs``).

The job is recon-01's (16 ranks, node-a / node-b, pids 41237+i and 52011+i, communicator 0xd8dcb35f94c662cd):
rank 13 arrives last at each of the AllReduces 4460-4470 (the others wait for it inside the kernel, so their
execution times are long and rank 13's short), then never launches 4471. ``python reconstruct.py`` rewrites
them."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent / "nccl-inspector-unknown-jobid"
SIZE = 25165824 * 4  # NumelIn 25165824 float32


def record(r: int, sn: int, exec_us: int, t_us: int) -> str:
    host, pid = ("node-a", 41237 + r) if r < 8 else ("node-b", 52011 + r - 8)
    algobw = SIZE / exec_us / 1e3
    busbw = algobw * 2 * 15 / 16
    return (
        '{"header":{"id":"0x%lx","comm_name":"%s","rank":%d,"n_ranks":%d,"nnodes":%lu},'
        '"metadata":{"inspector_output_format_version":"%s","git_rev":"%s","rec_mechanism":"%s",'
        '"dump_timestamp_us":%lu,"hostname":"%s","pid":%lu},'
        '"coll_perf":{"coll":"%s","coll_sn":%lu,"coll_msg_size_bytes":%lu,"coll_exec_time_us":%lu,'
        '"coll_timing_source":"%s","coll_algobw_gbs":%lf,"coll_busbw_gbs":%lf}}\n'
    ) % (
        0xD8DCB35F94C662CD,
        "unknown",
        r,
        16,
        2,
        "v4.0",
        "",
        "nccl_profiler_interface",
        t_us,
        host,
        pid,
        "AllReduce",
        sn,
        SIZE,
        exec_us,
        "kernel_gpu",
        algobw,
        busbw,
    )


if __name__ == "__main__":
    HERE.mkdir(exist_ok=True)
    t0 = 1732920538000000  # 2024-11-29 22:48:58 UTC (recon-01: step 1110 at 22:48:58, the hang from 22:49:02)
    for r in range(16):
        host, pid = ("node-a", 41237 + r) if r < 8 else ("node-b", 52011 + r - 8)
        lines = []
        for k, sn in enumerate(range(4460, 4471)):
            exec_us = 2113 + 7 * k if r == 13 else 61974 + 211 * ((r * 7 + k) % 5)
            lines.append(record(r, sn, exec_us, t0 + k * 300_000 + 100_000))
        (HERE / f"{host}-pid{pid}.log").write_text("".join(lines))
