"""hypothesis's entry point for `routing` (``[project.entry-points.hypothesis]``).

hypothesis loads its entry points when it is first imported. If that import comes from
`routing.testing.strategies` itself (a program that imports ``routing.testing.strategies``
first), the strategies do not exist yet; importing that module registers them once its body is done,
so the hook only has to make sure it gets imported. No import of hypothesis here.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["setup"]


def setup() -> None:
    """Make sure `routing.testing.strategies` is imported, which registers routing's types with
    ``st.register_type_strategy``; nothing to do while it is being imported."""
    if "routing.testing.strategies" not in sys.modules:
        importlib.import_module("routing.testing.strategies")
