"""TRANSITION ALIAS, removed before this session's last commit: `distplan.modeling.export`."""

import sys

from distplan.modeling import export as _moved

sys.modules[__name__] = _moved
