"""Shared test configuration. Keep each section small and self-contained."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# --------------------------------------------------------------------------- hypothesis
# Profiles, chosen by HYPOTHESIS_PROFILE (the Makefile sets "ci" for `make test`):
#   dev — fast feedback while editing (the default);
#   ci  — more examples, derandomized (same examples every run), failure blobs printed.
# Keep "ci" modest: the whole suite must run in under 10 minutes on 2 cores.
settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
