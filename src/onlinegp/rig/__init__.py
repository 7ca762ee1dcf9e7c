"""Robotic information gathering: fields, vehicle and sensor, planners, and the mission loop (DESIGN §4)."""
