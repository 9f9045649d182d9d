"""Platform adapters: each turns a chat platform's payloads into service calls and renders cards."""
