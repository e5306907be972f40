"""Reading a sweep folder back, with the explicit schemas of spark_reports.schemas:
a folder of another format version, a table missing, a column missing or an empty
sweep is refused with one line (ReportError)."""
from __future__ import annotations

import json
from pathlib import Path

from spark_reports.schemas import MANIFEST_FILE, PARTITION_COLUMNS, SWEEP_FORMAT_VERSION, TABLES, TRACE_SCHEMA_VERSION


class ReportError(Exception):
    pass


def read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST_FILE
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such folder")
    if not path.is_file():
        raise ReportError(f"{folder}: not a sweep folder (no {MANIFEST_FILE}; isrlab sweep writes one)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: not JSON ({exc})") from None
    version = manifest.get("sweep_format_version") if isinstance(manifest, dict) else None
    if version != SWEEP_FORMAT_VERSION:
        raise ReportError(f"{folder}: sweep format version {version!r}; this isrlab reads version "
                          f"{SWEEP_FORMAT_VERSION} (run the sweep again with this isrlab)")
    if manifest.get("trace_schema_version") != TRACE_SCHEMA_VERSION:
        raise ReportError(f"{folder}: trace schema version {manifest.get('trace_schema_version')!r}; this isrlab "
                          f"reads version {TRACE_SCHEMA_VERSION}")
    return manifest


def _data_files(table: Path) -> list[Path]:
    return sorted(table.rglob("*.parquet"))


def read_sweep(spark, folder: Path) -> dict:
    """The sweep's tables as DataFrames, read with their explicit schemas."""
    read_manifest(folder)
    tables = {}
    for name, schema in TABLES.items():
        table = folder / name
        if not table.is_dir():
            raise ReportError(f"{folder}: the {name} table is missing ({table})")
        files = _data_files(table)
        if files:  # one file's footer says which columns the writer wrote
            written = set(spark.read.parquet(str(files[0])).schema.fieldNames()) | set(PARTITION_COLUMNS)
            missing = [c for c in schema.fieldNames() if c not in written]
            if missing:
                raise ReportError(f"{table}: column {', '.join(missing)} missing from {files[0].name} "
                                  f"(written by another isrlab?)")
        tables[name] = spark.read.schema(schema).option("basePath", str(table)).parquet(str(table))
    if not _data_files(folder / "verdicts"):
        raise ReportError(f"{folder}: the sweep is empty (no runs in its verdicts table)")
    return tables
