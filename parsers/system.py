"""System, scheduler and kernel lines: Slurm srun/slurmstepd, shell ``Killed``, kernel OOM killer, NVIDIA Xid.

Sources: Slurm ``src/srun/task_state.c`` and ``slurmstepd/req.c`` (log-formats.md §7.1); the kernel
OOM killer (``Out of memory: Killed process N``) and NVIDIA driver ``NVRM: Xid`` lines from syslog/dmesg.
"""

from __future__ import annotations

from parsers.rules import Rule

RULES: list[Rule] = [
    Rule("srun_exit", "process_exit", "system", "Exited with exit code",
         r"srun: error: (?P<host>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\] ]+): Exited with exit code (?P<exit_code>\d+)",
         "error", "Slurm srun task_state.c (20.x – 24.x)", "srun: error: node-b: task 11: Exited with exit code 1"),
    Rule("srun_oom", "process_killed", "system", "Out Of Memory",
         r"srun: error: (?P<host>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\] ]+): Out Of Memory", "error",
         "Slurm srun task_state.c", "srun: error: node-b: task 11: Out Of Memory", (("signal", "SIGKILL"),)),
    Rule("srun_killed", "process_killed", "system", ": Killed",
         r"srun: error: (?P<host>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\] ]+): Killed", "error", "Slurm srun task_state.c",
         "srun: error: node-b: task 11: Killed", (("signal", "SIGKILL"),)),
    Rule("srun_terminated", "process_killed", "system", ": Terminated",
         r"srun: error: (?P<host>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\] ]+): Terminated", "error", "Slurm srun task_state.c",
         "srun: error: node-a: tasks 0-7: Terminated", (("signal", "SIGTERM"),)),
    Rule("srun_aborted", "process_killed", "system", ": Aborted",
         r"srun: error: (?P<host>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\] ]+): Aborted", "error", "Slurm srun task_state.c",
         "srun: error: node-b: task 3: Aborted (core dumped)", (("signal", "SIGABRT"),)),
    Rule("srun_segfault", "process_killed", "system", ": Segmentation fault",
         r"srun: error: (?P<host>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\] ]+): Segmentation fault", "error",
         "Slurm srun task_state.c", "srun: error: node-b: task 12: Segmentation fault (core dumped)", (("signal", "SIGSEGV"),)),
    Rule("stepd_cancelled", "job_cancelled", "system", "CANCELLED AT",
         r"\*\*\* (?:STEP|JOB) (?P<jobstep>\S+) ON (?P<host>\S+) CANCELLED AT (?P<cancel_ts>\S+)(?: DUE (?:TO|to) (?P<reason>[^*]+))?",
         "error", "Slurm slurmstepd req.c",
         "slurmstepd: error: *** STEP 812345.0 ON node-a CANCELLED AT 2024-11-29T23:08:55 DUE TO TIME LIMIT ***"),
    Rule("kernel_oom", "process_killed", "system", "Killed process",
         r"Out of memory: Killed process (?P<pid>\d+)", "error", "Linux kernel OOM killer (mm/oom_kill.c)",
         "Out of memory: Killed process 812917 (python) total-vm:123456kB, anon-rss:98765kB", (("signal", "SIGKILL"),)),
    Rule("xid", "cuda_error", "system", "NVRM: Xid", r"NVRM: Xid \((?P<pci>[^)]+)\): (?P<xid>\d+)", "error",
         "NVIDIA kernel driver Xid report", "NVRM: Xid (PCI:0000:1b:00): 79, pid=41237, GPU has fallen off the bus."),
    Rule("fallen_off_bus", "cuda_error", "system", "fallen off the bus", None, "error", "NVIDIA driver",
         "GPU 0000:1b:00.0: GPU has fallen off the bus."),
    Rule("faulthandler_segv", "process_killed", "system", "Fatal Python error: Segmentation fault", None, "fatal",
         "CPython faulthandler (PYTHONFAULTHANDLER=1)", "Fatal Python error: Segmentation fault", (("signal", "SIGSEGV"),)),
    Rule("faulthandler_bus", "process_killed", "system", "Fatal Python error: Bus error", None, "fatal",
         "CPython faulthandler (PYTHONFAULTHANDLER=1)", "Fatal Python error: Bus error", (("signal", "SIGBUS"),)),
    Rule("mpirun_first_failed", "worker_failed", "system", "Process name: [[",
         r"Process name: \[\[\d+,\d+\],(?P<rank_stated>\d+)\]", "error", "Open MPI 4.x mpirun (errmgr help text)",
         "  Process name: [[41871,1],3]"),
    # pdsh -S: the exit status of each host's remote command (pdsh 2.34, fixtures/cases/cap-25).
    Rule("pdsh_exit", "process_exit", "system", " exited with exit code ",
         r"^pdsh@[^:\s]+: (?P<host>[^:\s]+): \S+ exited with exit code (?P<exit_code>\d+)", "error", "pdsh 2.x (-S)",
         "pdsh@node-a: node-b: bash exited with exit code 1"),
    Rule("mpirun_aborted", "job_cancelled", "system", "the job has been aborted", None, "error",
         "Open MPI 4.x mpirun (errmgr help text)", "a non-zero exit code. Per user-direction, the job has been aborted."),
    Rule("shell_killed", "process_killed", "system", "Killed", r"^Killed$", "error", "POSIX shell job report",
         "Killed", (("signal", "SIGKILL"),)),
    Rule("segfault", "process_killed", "system", "Segmentation fault", r"^(?:.*: )?Segmentation fault(?: \(core dumped\))?$",
         "error", "POSIX shell job report", "Segmentation fault (core dumped)", (("signal", "SIGSEGV"),)),
]
