"""The Slack adapter: Bolt app (HTTP or Socket Mode), Block Kit rendering, App Home."""
