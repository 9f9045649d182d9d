"""RankZero: the chat bot (core engine, storage, platform adapters, CLI)."""
