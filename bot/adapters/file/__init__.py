"""The file platform: every outbound post appended to a JSON-lines file (dry runs and process tests)."""
