"""TRANSITION ALIAS, removed before this session's last commit: `distplan.modeling.model`."""

import sys

from distplan.modeling import model as _moved

sys.modules[__name__] = _moved
