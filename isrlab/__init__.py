"""The isrlab command line (nothing imports this package)."""
