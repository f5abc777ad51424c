"""The version of ``rocketmq-routing``: its one source (pyproject.toml reads it from here
through setuptools' dynamic ``version``, so pip, ``routing.__version__`` and
``routing --version`` agree)."""

__version__ = "0.2.0.dev0"
