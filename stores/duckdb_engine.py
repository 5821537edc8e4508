"""The DuckDB module the stores use: DuckDB's engine itself (`_duckdb`), not the `duckdb` package over it.

Since 2.0 the `duckdb` package builds a large Python layer (relations, expressions, data-source adapters) over
the C++ extension `_duckdb` when it is imported: about 0.1 s of CPU, a fifth of a short command's, which every
process that opens the store paid (each one-shot command, each hub). The stores use only what that layer
re-exports from `_duckdb` unchanged: `connect`, the connection class and the exception classes.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import _duckdb as duckdb
else:
    try:
        import _duckdb as duckdb
    except ImportError:  # a DuckDB whose engine lives inside the package (1.x)
        import duckdb

__all__ = ["duckdb"]
