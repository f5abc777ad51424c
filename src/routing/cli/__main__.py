"""``python -m routing.cli``: the ``routing`` command, for environments without its script."""

from routing.cli import main

if __name__ == "__main__":
    main()
