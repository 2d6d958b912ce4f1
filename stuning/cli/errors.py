"""Exit codes and the one-line error every command reports."""

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran, but a result was wrong or a step failed
EXIT_USAGE = 2  # bad arguments or input: nothing was run
EXIT_NO_GPU = 3  # the command needs a GPU and there is none
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C (128 + SIGINT, as shells report it); what was done is kept


class CLIError(Exception):
    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code
