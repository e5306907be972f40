"""PySpark reports and seed sweeps over many traces."""
