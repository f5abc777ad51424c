"""Deprecated: moved to `routing.testing.strategies` (0.2.0); this alias goes in 0.3.0.

``from routing import strategies`` still works for one release and warns; import
``routing.testing.strategies`` instead.
"""

from __future__ import annotations

import warnings

from .testing import strategies as _moved
from .testing.strategies import *  # noqa: F403

__all__ = list(_moved.__all__)

warnings.warn("routing.strategies moved to routing.testing.strategies; the old path goes in "
              "routing 0.3.0", DeprecationWarning, stacklevel=2)
