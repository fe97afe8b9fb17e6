# ruff: noqa: UP031  (printf-style on purpose: the strings are NCCL's own C format strings)
"""Write the RECONSTRUCTED NCCL RAS JSON fixtures of this folder with the format strings of NVIDIA/nccl
``src/ras/client_support.cc`` (commit 5067397, NCCL 2.30.7; JSON since 2.28.7): ``jsonWriteHeader``,
``jsonStartCommunicator``, ``jsonWriteRankData``, ``jsonStartMissingRanks``, ``jsonWriteMissingRank``,
``jsonEndCommunicator``, ``jsonWriteFooter`` and the monitor event of ``rasClientsNotifyEvent``. The job is
recon-01's (16 ranks on node-a / node-b, pids 41237+i and 52011+i, communicator commId 0xd8dcb35f94c662cd):
rank 13 stopped responding. ``python tests/data/ras/reconstruct.py`` rewrites them."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
FUNCS = [
    "Broadcast",
    "Reduce",
    "AllGather",
    "ReduceScatter",
    "AllReduce",
]  # ncclFuncToString, NCCL_NUM_FUNCTIONS


def host_pid(r: int) -> tuple[str, int]:
    return ("192.0.2.11", 41237 + r) if r < 8 else ("192.0.2.12", 52011 + r - 8)


def status(missing: list[int], dead: bool, counts: dict[int, int]) -> str:
    o = ["{\n"]
    o.append('  "nccl_version": "2.29.1",\n')
    o.append('  "cuda_runtime_version": 12080,\n')
    o.append('  "cuda_driver_version": 12080,\n')
    o.append('  "timestamp": "2024-11-29 22:51:02",\n')
    o.append('  "communicators_count": 1,\n')
    o.append('  "communicators": [\n')
    ranks = [r for r in range(16) if r not in missing]
    o.append("    {\n")
    o.append('      "hash": "0x%lx",\n' % 0xD8DCB35F94C662CD)
    o.append('      "secondary_hash": "0x%lx:0x%lx",\n' % (0x9A1B2C3D4E5F6071, 0x1122334455667788))
    o.append('      "size": %d,\n' % 16)
    o.append('      "ranks_count": %d,\n' % len(ranks))
    o.append('      "missing_ranks_count": %d,\n' % len(missing))
    o.append('      "ranks": [\n')
    for i, r in enumerate(ranks):
        h, p = host_pid(r)
        if i:
            o.append(",\n")
        o.append("        {\n")
        o.append('          "rank": %d,\n' % r)
        o.append('          "host": "%s",\n' % h)
        o.append('          "pid": %d,\n' % p)
        o.append('          "cuda_dev": %d,\n' % (r % 8))
        o.append('          "nvml_dev": %d,\n' % (r % 8))
        o.append('          "status": {\n')
        o.append('            "init_state": %d,\n' % 0)
        o.append('            "async_error": %d,\n' % 0)
        o.append('            "finalize_called": %s,\n' % "false")
        o.append('            "destroy_flag": %s,\n' % "false")
        o.append('            "abort_flag": %s\n' % "false")
        o.append("          },\n")
        o.append('          "collective_counts": {\n')
        for k, f in enumerate(FUNCS):
            o.append('            "%s": %d' % (f, counts.get(r, 4471) if f == "AllReduce" else 3))
            if k < len(FUNCS) - 1:
                o.append(",")
            o.append("\n")
        o.append("          }\n")
        o.append("        }")
    o.append("\n      ],\n")
    o.append('      "missing_ranks": [\n')
    for i, r in enumerate(missing):
        h, p = host_pid(r)
        if i:
            o.append(",\n")
        o.append("        {\n")
        o.append('          "rank": %d,\n' % r)
        o.append('          "host": "%s",\n' % h)
        o.append('          "pid": %d,\n' % p)
        o.append('          "cuda_dev": %d,\n' % (r % 8))
        o.append('          "nvml_dev": %d,\n' % (r % 8))
        o.append('          "status": {\n')
        o.append('            "unresponsive": %s,\n' % "true")
        o.append('            "considered_dead": %s\n' % ("true" if dead else "false"))
        o.append("          }\n")
        o.append("        }")
    o.append("\n      ]\n")
    o.append("    }")
    o.append("\n  ],\n")
    o.append('  "ras": {\n')
    o.append('    "collection_time_sec": %.3f,\n' % 2.051)
    o.append('    "timeouts_count": %d\n' % (2 if missing else 0))
    o.append("  }\n")
    o.append("}\n")
    return "".join(o)


def event(ev: str, r: int, details: str) -> str:
    h, p = host_pid(r)
    return (
        "{\n"
        '  "timestamp": "%s",\n'
        '  "group": "%s",\n'
        '  "event": "%s",\n'
        '  "peer": {\n'
        '    "host": "%s",\n'
        '    "pid": %d,\n'
        '    "cuda_devs": %s,\n'
        '    "nvml_devs": %s\n'
        "  },\n"
        '  "details": "%s"\n'
        "}\n"
    ) % ("2024-11-29 22:52:05", "LIFECYCLE", ev, h, p, f"[{r % 8}]", f"[{r % 8}]", details)


if __name__ == "__main__":
    (HERE / "recon01-status-missing13.json").write_text(status([13], False, {}))
    (HERE / "recon01-status-behind13.json").write_text(status([], False, {13: 4470}))
    (HERE / "recon01-monitor.json").write_text(event("PEER_DEAD", 13, ""))
