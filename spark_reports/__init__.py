"""PySpark reports and seed sweeps over many traces (step 8)."""
