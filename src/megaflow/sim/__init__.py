"""Discrete-event cluster simulator driving the real scheduler on a virtual clock."""
