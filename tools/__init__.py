"""Set-up, data and analysis scripts (``python -m tools.report`` among them)."""
