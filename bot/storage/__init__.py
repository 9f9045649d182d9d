"""Storage: SQLAlchemy models, the SQL unit of work, migrations helpers, question-bank sync."""
