"""Error types and the CLI's documented exit codes (README.md, "Exit codes"; `grotool --help`;
docs/input-output.md)."""

EXIT_OK = 0
EXIT_DIFFERENT = 1      # a check found a difference
EXIT_USAGE = 2          # bad command line (click's own code)
EXIT_BAD_INPUT = 3      # unreadable, corrupt or unsupported input
EXIT_ENVIRONMENT = 4    # missing privilege or tool
EXIT_OUTPUT = 5         # an output could not be written (path, permission, disk full) or is an input file
EXIT_INPUT_TRUNCATED = 6  # the input's last record was cut short: every complete record was processed
EXIT_SIGNAL_BASE = 128  # killed by signal N: exit 128 + N (SIGINT 130, SIGHUP 129, SIGTERM 143)


class GrotoolError(Exception):
    """An error meant for the user: printed as one line, mapped to an exit code."""

    exit_code = EXIT_BAD_INPUT


class InputError(GrotoolError):
    """Unreadable, corrupt or unsupported input (exit 3)."""

    exit_code = EXIT_BAD_INPUT


class EnvironmentProblem(GrotoolError):
    """Missing privilege or system tool (exit 4)."""

    exit_code = EXIT_ENVIRONMENT


class OutputError(GrotoolError):
    """An output path that cannot be written, or a write that failed (exit 5)."""

    exit_code = EXIT_OUTPUT


class Interrupted(BaseException):
    """Raised by the CLI's signal handlers (SIGINT, SIGTERM, SIGHUP) so that every
    cleanup path runs; a BaseException so that ``except Exception`` lets it pass."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
