"""The Discord adapter: slash commands, persistent buttons and the private problem flow (discord.py 2.x)."""
