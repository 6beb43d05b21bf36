"""Presentation of results: tables (text / Markdown / JSON), the ab-style bench
report, DataFrames, diffs of two saved results, HdrHistogram export, Jupyter
display, progress bars and the ``httpbench report`` / ``httpbench diff`` commands.

Every number in a DataFrame or a JSON report is in base units (ns, bytes, per
second); text and Markdown tables choose readable units (see ``_units``).

This module is the public face; each job lives in its own module: tables and
DataFrames in ``_resulttables``, the ab-style report in ``_abreport``, HTML and
Jupyter in ``_htmlreport``, progress bars in ``_progress``, the commands in
``_reportcli``.
"""

from __future__ import annotations

from ._abreport import (
    REPORT_PERCENTILES,
    SPECTRUM,
    ab_report,
    format_report,
    format_spectrum,
    idle_note,
    idle_workers,
)
from ._baseline import Change, Comparison, diff
from ._cmptables import compare_table, format_tables
from ._hdrexport import (
    export_hdr_log,
    export_histogram,
    hdr_compressed,
    hdr_hgrm,
    hdr_interval_log,
)
from ._hist import percentile_spectrum
from ._htmlreport import (
    html_diff,
    html_diff_fragment,
    html_fragment,
    html_report,
    html_tables,
    mimebundle,
    write_html,
)
from ._progress import ProgressBar, interactive, progress_bar
from ._reportcli import cli_main, diff_main
from ._resulttables import (
    format_result,
    format_resultset,  # noqa: F401  (importable, not in __all__)
    to_dataframe,
)
from ._rows import CELL_COLUMNS, DATAFRAME_COLUMNS, cell_rows, result_rows
from ._stats import mann_whitney_u, welch_t_test

__all__ = [
    "CELL_COLUMNS",
    "DATAFRAME_COLUMNS",
    "REPORT_PERCENTILES",
    "SPECTRUM",
    "Change",
    "Comparison",
    "ProgressBar",
    "ab_report",
    "cell_rows",
    "cli_main",
    "compare_table",
    "diff",
    "diff_main",
    "export_hdr_log",
    "export_histogram",
    "format_report",
    "format_result",
    "format_spectrum",
    "format_tables",
    "hdr_compressed",
    "hdr_hgrm",
    "hdr_interval_log",
    "html_diff",
    "html_diff_fragment",
    "html_fragment",
    "html_report",
    "html_tables",
    "idle_note",
    "idle_workers",
    "interactive",
    "mann_whitney_u",
    "mimebundle",
    "percentile_spectrum",
    "progress_bar",
    "result_rows",
    "to_dataframe",
    "welch_t_test",
    "write_html",
]

