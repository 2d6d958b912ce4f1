"""Command-line interface (``stuning ...``): parsing, tables, plots and exit codes only."""
