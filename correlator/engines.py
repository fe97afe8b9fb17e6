"""The engines that run the batches of a streaming ``rankscope timeline`` (``--engine``): ``local``, this
machine's cores (:mod:`correlator.batch`), and ``ray``, Ray tasks (:mod:`correlator.rayengine`). One
definition of their names, for the CLI's choices and the API's check; imports nothing but
:mod:`correlator.errors`, so an engine is checked before polars and pyarrow load."""

from __future__ import annotations

from enum import Enum

from correlator.errors import InputError


class Engine(str, Enum):
    local = "local"
    ray = "ray"


ENGINES = tuple(e.value for e in Engine)


def check_engine(engine: str, error: type[Exception] = InputError) -> str:
    """``engine`` when it names an engine, else ``error`` (:class:`InputError`: the CLI prints it and exits
    2) naming the engines."""
    if engine not in ENGINES:
        raise error(f"--engine {engine}: use {' or '.join(ENGINES)}")
    return engine


__all__ = ["ENGINES", "Engine", "check_engine"]
