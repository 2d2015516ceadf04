"""The megaflow command line."""
