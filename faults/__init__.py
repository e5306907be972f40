"""One fault vocabulary, as data. Each binding has its own executor for it."""
