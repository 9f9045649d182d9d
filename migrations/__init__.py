"""Alembic migrations (script location for ``rankzero db upgrade``)."""
