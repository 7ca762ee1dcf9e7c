"""Robotic information gathering: fields, vehicle and sensor, planners, and the mission loop of active mapping
(Chen et al. 2024, §V-A)."""
