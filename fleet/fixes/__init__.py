"""Automatic repair of failed runs: memory feasibility before launch, fixes after a failure, and the quarantine of configurations a GPU architecture cannot run."""
