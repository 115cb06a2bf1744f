"""``python -m c3async`` and the ``c3async`` command. Ctrl-C and SIGTERM are handled from the
first statement on (``stop``), before the command's modules are imported."""

from .ground import stop

stop.install()


def main() -> int:
    """Run the command, then end the process at once (``stop.exit_now``): a Ctrl-C that comes
    while the interpreter would tear itself down can then not print anything."""
    from .cli import run

    try:
        code = run()
    except SystemExit as exc:  # argparse's usage errors and --help
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BaseException as exc:
        signalled = stop.code_of(exc)  # a Ctrl-C or SIGTERM (maybe inside a task group's exceptions)
        if signalled is None:
            raise
        code = signalled
    stop.exit_now(code)
    return code  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
