"""TRANSITION ALIAS, removed before this session's last commit: `distplan.modeling.scheduling`."""

import sys

from distplan.modeling import scheduling as _moved

sys.modules[__name__] = _moved
