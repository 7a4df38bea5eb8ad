"""Error types and the CLI's documented exit codes."""

EXIT_OK = 0
EXIT_DIFFERENT = 1      # a check found a difference
EXIT_USAGE = 2          # bad command line (click's own code)
EXIT_BAD_INPUT = 3      # unreadable, corrupt or unsupported input
EXIT_ENVIRONMENT = 4    # missing privilege or tool


class GrotoolError(Exception):
    """An error meant for the user: printed as one line, mapped to an exit code."""

    exit_code = EXIT_BAD_INPUT


class InputError(GrotoolError):
    """Unreadable, corrupt or unsupported input (exit 3)."""

    exit_code = EXIT_BAD_INPUT


class EnvironmentProblem(GrotoolError):
    """Missing privilege or system tool (exit 4)."""

    exit_code = EXIT_ENVIRONMENT
