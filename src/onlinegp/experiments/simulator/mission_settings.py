"""From a mission's settings by name, as the command line gives them, to its :class:`~.mission.MissionConfig`; and
the checks before a mission runs: what its run directory holds, and a budget the pilot survey spends whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...io import run_kind
from .fields import DEFAULT_ENV
from .mission import Mission, MissionConfig
from .run import CHECKPOINT, run_state

#: :func:`~.fields.load_field`'s options for a DEM file, given one by one (``mission --extent`` ... ``--values``)
FIELD_OPTIONS = ("extent", "cell_size", "array", "first_row", "nodata", "values")


def mission_config(
    env: str | None = None, inducing: str | None = None, model_options: dict | None = None, **settings: Any
) -> MissionConfig:
    """The mission of ``settings``, None meaning unset: :class:`~.mission.MissionConfig`'s fields, with ``env``
    (None: :data:`~.fields.DEFAULT_ENV`), ``inducing`` (the model's inducing-point selector, joined to
    ``model_options``) and :data:`FIELD_OPTIONS` (gathered into ``field_options``).

    Raises ValueError (or TypeError) for a setting the mission refuses."""
    field_options = {key: value for key in FIELD_OPTIONS if (value := settings.pop(key, None)) is not None}
    return MissionConfig(
        env=env or DEFAULT_ENV,
        model_options={**(model_options or {}), **({"inducing": inducing} if inducing else {})},
        field_options=field_options or None,
        **settings,
    )


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
