"""Bolt listeners of the Slack adapter, one module per payload family."""
