"""Every numeric parameter of every formulation declares its range (``least``, ``most`` or
``above`` of `Formulation`), so that a value outside it is a named input error before
anything runs: negative caps, shares, tolerances and counts had run silently (placement's
nonzero caps, TAG's alpha, codec_select's improve_seconds) or ended in a traceback
(libra_perf_lp max_rounds=-1: UnboundLocalError)."""

from __future__ import annotations

from typing import Any

import pytest

from distplan.errors import InputError
from distplan.formulations.registry import Formulation, formulations, get_formulation

KINDS = ("placement", "sharding", "compression", "pipeline", "bandwidth")


def _numeric_params() -> list[tuple[Formulation, str, Any]]:
    out = []
    for kind in KINDS:
        for form in formulations(kind):
            for name, default in (form.params or {}).items():
                example = (form.examples or {}).get(name)
                if isinstance(default, bool):
                    continue
                if isinstance(default, int | float) or (default is None and isinstance(example, int | float) and not isinstance(example, bool)):
                    out.append((form, name, default if default is not None else example))
    return out


PARAMS = _numeric_params()


def test_there_are_numeric_parameters() -> None:
    assert len(PARAMS) > 30


@pytest.mark.parametrize(("form", "name", "default"), PARAMS, ids=[f"{f.kind}-{f.name}-{n}" for f, n, _ in PARAMS])
def test_every_numeric_parameter_declares_its_range(form: Formulation, name: str, default: Any) -> None:
    declared = {**(form.least or {}), **(form.most or {}), **(form.above or {})}
    assert name in declared, f"{form.kind}/{form.name}: parameter {name} (default {default}) has no declared range"
    form.check_params({name: default})  # the default lies in it
    low = form.least.get(name) if form.least else None
    above = form.above.get(name) if form.above else None
    if low is not None or above is not None:
        below = (low if low is not None else above) - 1
        with pytest.raises(InputError, match=rf"^params\.{name}: expected"):
            get_formulation(form.kind, form.name).check_params({name: below})
