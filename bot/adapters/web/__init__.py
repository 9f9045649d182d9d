"""The read-only web page of a channel (issue 30 §3): signed links, served by ``rankzero serve``."""
