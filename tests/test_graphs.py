"""distplan's own graph routines against scipy / networkx on random graphs."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

from distplan.models.graphs import component_roots


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), m=st.integers(0, 40), seed=st.integers(0, 10_000))
def test_component_roots_partition_like_scipy(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    roots = component_roots(n, u, v)
    _, labels = connected_components(sp.coo_matrix((np.ones(m), (u, v)), shape=(n, n)), directed=False)
    # same partition, each component named by its least node
    for k in range(n):
        members = np.flatnonzero(labels == labels[k])
        assert roots[k] == members.min()
        assert np.all(roots[members] == roots[k])
