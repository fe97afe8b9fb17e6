"""correlator.allocator: rankscope's default for polars' jemalloc, set only before polars is loaded."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ENV = "_RJEM_MALLOC_CONF"


def _conf_seen(code: str, env_value: str | None) -> str:
    """The ``_RJEM_MALLOC_CONF`` a fresh interpreter ends with after running ``code``."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if env_value is not None:
        env[ENV] = env_value
    out = subprocess.run(
        [sys.executable, "-c", code + f"\nimport os; print(os.environ.get({ENV!r}, '<unset>'))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


def test_correlator_first_appends_muzzy_zero_after_polars_defaults() -> None:
    # polars 2.1 writes its defaults first and appends what it finds in the variable; jemalloc takes the
    # last value of an option, so muzzy_decay_ms ends at 0.
    # (import correlator loads no polars since issue #32 item 3: polars comes with the first engine import)
    conf = _conf_seen("import correlator\nimport correlator.ingest", None)
    assert conf.endswith(",muzzy_decay_ms:0"), conf
    opts = dict(o.split(":") for o in conf.split(","))  # the last value of each option, as jemalloc reads it
    assert opts["muzzy_decay_ms"] == "0"


def test_a_users_setting_is_kept() -> None:
    conf = _conf_seen("import correlator\nimport correlator.ingest", "dirty_decay_ms:7")
    assert conf.endswith(",dirty_decay_ms:7"), conf
    assert "muzzy_decay_ms:0" not in conf


def test_polars_loaded_first_keeps_polars_defaults() -> None:
    conf = _conf_seen("import polars\nimport correlator", None)
    assert "muzzy_decay_ms:0" not in conf, conf


@pytest.mark.parametrize("preset", [None, "x"])
def test_configure_in_process_sets_nothing_once_polars_is_loaded(
    monkeypatch: pytest.MonkeyPatch, preset: str | None
) -> None:
    import polars  # noqa: F401  # (import correlator no longer loads it: issue #32 item 3)

    from correlator import allocator

    if preset is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, preset)
    assert "polars" in sys.modules
    assert allocator.configure() is False
    assert os.environ.get(ENV) == preset
