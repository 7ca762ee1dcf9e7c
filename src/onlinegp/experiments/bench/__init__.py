"""Named experiments reproducing published tables and figures, and the sweep runner they share."""

from .runner import RunnerOptions, RunResult, RunSpec, SweepResult, is_finished, run_sweep

__all__ = ["RunSpec", "RunResult", "RunnerOptions", "SweepResult", "is_finished", "run_sweep"]
