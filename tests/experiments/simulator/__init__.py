"""Tests of onlinegp.experiments.simulator: fields, robot, planners, missions and fleets."""
