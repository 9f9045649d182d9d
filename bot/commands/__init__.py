"""The platform-neutral command layer, between the chat adapters and the core services.

An adapter translates a platform payload into one call here (who, where, what they typed or clicked) and
renders what comes back; everything the platforms share lives here: who is an admin (from what the
platform reports), the parsing and validation of command text, the answer/hint/next flow with its one
deadline timer, and the dropping of redelivered events. It imports no discord, slack or storage module.
"""
