"""Tests of onlinegp.experiments.service: the live mapping service."""
