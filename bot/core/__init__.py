"""Platform-neutral domain: models, cards, scoring, selection, ports and the service use cases.

Nothing here imports discord, slack_bolt, sqlalchemy or httpx (tests/test_layering.py enforces it).
"""
