"""Scenario files: the model, strict validation with file and line, and the runner."""
