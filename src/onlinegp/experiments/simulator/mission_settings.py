"""From a mission's settings by name, as the command line gives them, to its :class:`~.mission.MissionConfig`; and
the checks before a mission runs: what its run directory holds, and a budget the pilot survey spends whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...io import run_kind
from ..flags import from_settings
from .mission import Mission, MissionConfig
from .run import CHECKPOINT, run_state


def mission_config(model_options: dict | None = None, **settings: Any) -> MissionConfig:
    """The mission of the command's ``settings`` by name, None meaning unset (the field's default): the options
    :class:`~.mission.MissionConfig` declares (:func:`~onlinegp.experiments.flags.from_settings`), those of
    :class:`~.mission.ModelSettings` (``inducing``) joined to ``model_options`` and those of
    :class:`~.fields.FieldOptions` gathered into ``field_options``, or any other field of the config.

    Raises ValueError (or TypeError) for a setting the mission refuses."""
    return MissionConfig(**from_settings(MissionConfig, settings, model_options=model_options))


def check_run_directory(out: str | Path | None, resume: bool, force: bool) -> str | None:
    """What the run directory ``out`` holds (:func:`~.run.run_state`; None for no ``out``), checked against
    ``resume`` and ``force``: a ValueError naming the option to pass when it holds another run, nothing to resume, or
    a mission that is neither resumed nor started over."""
    held = None if out is None else run_kind(out)
    if held not in (None, "mission") and not force:
        raise ValueError(f"{out} holds a {held} run, not a mission: pass --force to replace it, or another --out")
    state = None if held != "mission" else run_state(out)
    if resume and state is None:
        raise ValueError(f"nothing to resume in {out}: it holds no {CHECKPOINT}")
    if state == "finished" and not (resume or force):
        raise ValueError(
            f"{out} holds a finished mission: pass --force to overwrite it, or another --out (none: a new directory)"
        )
    if state == "checkpoint" and not (resume or force):
        raise ValueError(f"{out} holds an unfinished mission: pass --resume to continue it or --force to start over")
    return state


def pilot_only_warning(mission: Mission) -> str | None:
    """The warning for a budget at or below the pilot survey's samples (the mission is then the pilot survey alone),
    else None. Raises ValueError when the pilot survey cannot be driven."""
    config = mission.config
    pilot = mission.pilot_size()
    if config.budget > pilot:
        return None
    extent = (config.field_options or {}).get("extent")
    return (
        f"the budget ({config.budget}) is at or below the pilot survey's {pilot} samples: the mission will be the "
        "pilot survey only, with no decision epochs"
        + (
            " (over a DEM's own extent, a faster --speed covers more ground per sample)"
            if extent not in (None, "normalised")
            else ""
        )
    )
