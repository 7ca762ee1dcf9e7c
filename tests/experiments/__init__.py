"""Tests of onlinegp.experiments: the command line, streams, replays; simulator/ and bench/ as in the source."""
