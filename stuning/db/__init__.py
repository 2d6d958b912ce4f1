"""The tuning database: per-device JSON files of tuned kernel configs, with lookup and locked merges.

Data, not code: this package reads and writes JSON and imports neither Triton nor the kernels, so
the files can be inspected, merged and pruned on any machine.
"""

from stuning.db.entry import (
    RATIO,
    DBEntry,
    FailedConfig,
    TimedConfig,
    dtype_name,
    feature_distance,
    make_key,
    merge_entries,
)
from stuning.db.environment import Environment, same_environment
from stuning.db.misses import load_misses
from stuning.db.paths import ENV_DB_DIR, db_file_name, default_search_path, device_slug, misses_file_name
from stuning.db.schema import (
    DEFAULT_OBJECTIVE,
    SCHEMA_VERSION,
    TOP_K,
    CorruptDatabaseError,
    empty_document,
    validate_document,
)
from stuning.db.storage import load_document, merge_files, prune_stale
from stuning.db.tuning_db import LookupResult, StaleEntriesWarning, TuningDB, export

__all__ = [
    "DBEntry", "FailedConfig", "TimedConfig", "dtype_name", "make_key", "merge_entries",
    "Environment", "same_environment",
    "load_misses",
    "ENV_DB_DIR", "db_file_name", "default_search_path", "device_slug", "misses_file_name",
    "DEFAULT_OBJECTIVE", "SCHEMA_VERSION", "TOP_K",
    "CorruptDatabaseError", "empty_document", "validate_document",
    "load_document", "merge_files", "prune_stale",
    "RATIO", "LookupResult", "StaleEntriesWarning", "TuningDB", "export", "feature_distance",
]
