"""``python -m c3async`` and the ``c3async`` command. Ctrl-C and SIGTERM are handled from the
first statement on, before anything else is imported: until ``stop`` is in place a signal ends
the process at once (nothing has been done yet), then ``stop`` takes over. What Python does
before this file runs (its own start-up) is Python's."""

import _signal  # type: ignore[import-not-found]  # built in: importing it runs no Python code


def _early(signum: int, frame: object) -> None:
    import os  # loaded at interpreter start-up: no import happens here

    os._exit(128 + signum)


for _sig in (_signal.SIGINT, _signal.SIGTERM):
    _signal.signal(_sig, _early)

from .ground import stop  # noqa: E402 - after the handlers, on purpose

stop.install()


def main() -> int:
    """Run the command, then end the process at once (``stop.exit_now``): a Ctrl-C that comes
    while the interpreter would tear itself down can then not print anything."""
    import sys

    try:
        code = None
        if sys.argv[1:2] == ["statusline"]:  # every window's, after each response: no CLI package
            from .statusline import main as statusline

            code = statusline(sys.argv[2:])
        elif sys.argv[1:2] == ["--complete"]:  # the shell's, on each Tab: no CLI package either
            from .completion import main as complete

            code = complete(sys.argv[2:])
        if code is None:
            from .cli import main as command  # inside the guard: a signal during its imports is quiet too

            code = command()
    except BaseException as exc:
        signalled = stop.code_of(exc)  # a Ctrl-C or SIGTERM (maybe inside a task group's exceptions)
        if signalled is None:
            raise
        code = signalled
    stop.exit_now(code)
    return code  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
