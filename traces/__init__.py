"""Traces, throughput tables and the default job catalog (thesis §5.7.1, Table 5.2)."""

from .catalog import (
                      Catalog,
                      JobTypeInfo,
                      checkpoint_seconds,
                      default_catalog,
                      default_prices,
                      default_table,
                      load_catalog,
)
from .errors import TraceError
from .formats import load_trace, read_trace, sort_by_arrival, validate_trace, write_trace
from .generator import generate_trace
from .throughputs import dump_table, load_table, table_to_gavel_dict, table_to_native_dict
from .types import ThroughputTable, TraceJob

__all__ = [
    "Catalog", "JobTypeInfo", "ThroughputTable", "TraceError", "TraceJob", "checkpoint_seconds",
    "default_catalog", "default_prices", "default_table", "dump_table", "generate_trace",
    "load_catalog", "load_table", "load_trace", "read_trace", "sort_by_arrival",
    "table_to_gavel_dict", "table_to_native_dict", "validate_trace", "write_trace",
]
