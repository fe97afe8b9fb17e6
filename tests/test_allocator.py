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


@pytest.mark.parametrize("user", [None, "dirty_decay_ms:7"])
def test_a_batch_worker_process_starts_with_the_worker_setting_unless_the_user_set_one(
    monkeypatch: pytest.MonkeyPatch, user: str | None
) -> None:
    from correlator import allocator, pool

    # as the CLI starts: rankscope's value (polars has appended it to its own defaults) or the user's
    monkeypatch.setattr(allocator, "_OURS", user is None)
    here = user or "dirty_decay_ms:500,muzzy_decay_ms:1000,muzzy_decay_ms:0"
    monkeypatch.setenv(ENV, here)
    monkeypatch.delenv("POLARS_MAX_THREADS", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")  # the user's: kept
    names = [ENV, "POLARS_MAX_THREADS", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"]
    # what each spawned worker process finds in its environment (os.getenv pickles by name)
    seen = list(pool.in_order(os.getenv, names * 2, workers=2, kind="processes"))
    want = [
        user or "dirty_decay_ms:5000,muzzy_decay_ms:0",
        str(max(1, pool.cores() // 2)),
        "33554432",
        "12345",
    ]
    assert seen == want * 2
    # and this process's environment is as it was
    assert os.environ.get(ENV) == here
    assert "POLARS_MAX_THREADS" not in os.environ
    assert "MALLOC_MMAP_THRESHOLD_" not in os.environ
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "12345"


def _worker_conf_seen(first: str, env_value: str | None) -> str:
    """``allocator.worker_conf()`` in a fresh interpreter after ``first``, with ``_RJEM_MALLOC_CONF`` set to
    ``env_value`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if env_value is not None:
        env[ENV] = env_value
    code = first + "\nfrom correlator import allocator\nprint(allocator.worker_conf())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize(
    ("first", "env_value", "want"),
    [
        ("import correlator\nimport polars", None, "dirty_decay_ms:5000,muzzy_decay_ms:0"),  # the CLI's case
        ("import correlator\nimport polars", "dirty_decay_ms:7", "None"),  # the user's setting
        ("import polars\nimport correlator", None, "None"),  # a host program loaded polars first
    ],
)
def test_the_worker_setting_applies_where_rankscope_chose_this_processs(
    first: str, env_value: str | None, want: str
) -> None:
    assert _worker_conf_seen(first, env_value) == want
