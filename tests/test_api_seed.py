"""``seed`` is checked like the other solve options (review rev23c: ``"x"`` and ``-1``
ended as internal errors inside a backend, ``1.5`` and ``True`` were recorded as given)."""

from __future__ import annotations

import pytest

import distplan
from distplan.errors import InputError


@pytest.mark.parametrize("seed", ["x", -1, 1.5, True, 2**31, [1]])
def test_a_bad_seed_is_a_named_input_error(seed: object) -> None:
    with pytest.raises(InputError, match=r"^seed: must be a whole number from 0 to 2147483647"):
        distplan.solve("placement-small-1", "placement_milp", seed=seed)  # type: ignore[arg-type]


def test_a_good_seed_is_recorded() -> None:
    res = distplan.solve("placement-small-1", "placement_milp", seed=7)
    assert res.options is not None and res.options["seed"] == 7
