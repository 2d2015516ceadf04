"""Wiring: builds the services of a run from its config."""
