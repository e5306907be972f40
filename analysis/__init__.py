"""Trace format, histories, checkers and timelines (no Spark here)."""
