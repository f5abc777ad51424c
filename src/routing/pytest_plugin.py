"""Deprecated: moved to `routing.testing.pytest_plugin` (0.2.0); this alias goes in 0.3.0.

The ``pytest11`` entry point already loads the new module, so nothing needs this path;
``-p routing.pytest_plugin`` still works for one release and warns.
"""

from __future__ import annotations

import warnings

from .testing.pytest_plugin import *  # noqa: F403
from .testing.pytest_plugin import __all__ as __all__

warnings.warn("routing.pytest_plugin moved to routing.testing.pytest_plugin; the old path goes "
              "in routing 0.3.0", DeprecationWarning, stacklevel=2)
