"""``python -m grotool`` and the ``grotool`` console script."""

import gc


def main() -> None:
    # Start-up makes many long-lived objects (modules, classes, tables) and frees
    # few: a collection before the replay only re-examines them.  cli.run
    # freezes them and turns the collector back on.
    gc.disable()
    from .cli import run

    run()


if __name__ == "__main__":
    main()
