"""The phase timer of a mission (onlinegp.experiments.simulator.phases): what open_mission, run_mission and the
planner report into it."""

import time

from onlinegp.experiments.simulator.mission import MissionConfig
from onlinegp.experiments.simulator.phases import PhaseTimer, phase
from onlinegp.experiments.simulator.run import open_mission, run_mission
from tests.library.portable_probe import SMALL


def test_a_phase_counts_only_while_its_timer_is_active():
    timer, inner = PhaseTimer(), PhaseTimer()
    with phase("outside"):
        pass
    with timer:
        with phase("a"):
            time.sleep(0.01)
        with phase("a"):
            pass
        with inner, phase("b"):  # the innermost active timer gets the report
            pass
        with phase("c"):
            pass
    assert set(timer.seconds) == {"a", "c"} and timer.seconds["a"] >= 0.01 and set(inner.seconds) == {"b"}


def test_a_mission_reports_its_phases_to_the_active_timer_or_the_one_given(tmp_path):
    active, given = PhaseTimer(), PhaseTimer()
    with active:
        mission = open_mission(MissionConfig(**SMALL), tmp_path / "a")
        result = run_mission(mission, tmp_path / "a", quiet=True)
    assert result.completed and run_mission(MissionConfig(**SMALL), tmp_path / "b", quiet=True, phases=given).completed
    assert set(active.seconds) == {"mission_build", "run", "epochs", "checkpoints", "figures", "outputs", "candidates"}
    assert set(given.seconds) == set(active.seconds) - {"mission_build"}  # built before the timer was given
    s = active.seconds
    assert s["epochs"] + s["checkpoints"] + s["figures"] + s["outputs"] <= s["run"]
    assert s["candidates"] <= s["epochs"] and result.rows[-1]["wall_time"] <= s["epochs"]
