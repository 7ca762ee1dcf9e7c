"""Tests of onlinegp.models: the conformance suite over every registered model, then one file per method."""
