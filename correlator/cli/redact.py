"""``rankscope redact DIR -o OUT_DIR``: a pseudonymized copy of the logs (:mod:`correlator.redact`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from correlator.cli.common import UsageError, err, input_path, safe


def redact(
    directory: Annotated[
        Path,
        typer.Argument(
            help="Directory (or single file) of logs to redact; also a tar or zip archive of them, or - "
            "for standard input.",
            show_default=False,
            callback=input_path,
        ),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder to write the redacted copy to.")],
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
) -> None:
    """Write a copy of the logs with host names, IPs, user names, e-mails and secrets replaced by stable
    pseudonyms (host-1, ip-3, user-1, <secret-1>); diagnosing the copy names the same ranks."""
    from correlator.redact import redact_dir

    if not directory.exists():
        raise UsageError(f"{directory}: no such file or directory")
    from correlator.output import check_output, given_input

    if given_input(directory) is not None:  # an archive unpacked: -o must not be the archive either
        check_output(directory, output)
    try:
        stats = redact_dir(directory, output)
    except ValueError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"{output}: cannot write ({e.strerror or e})") from None
    if not quiet:
        for w in stats.skipped:
            err.print(f"[yellow]warning:[/] {safe(w)}", highlight=False, soft_wrap=True)
        kinds = ", ".join(f"{k} {v}" for k, v in stats.distinct.items() if v)
        err.print(
            f"wrote {stats.files} files ({stats.lines} lines) to {safe(output)}; replaced: {kinds or 'nothing'}",
            highlight=False,
            soft_wrap=True,
        )
