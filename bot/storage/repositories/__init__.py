"""SQL repositories, one per storage port of bot/core/repositories/ (same module names), handed out
by SqlUnitOfWork.

``drafts`` and ``deliveries`` are the two engine-bound stores the adapters use directly (each call its
own short transaction): question drafts written through, and delivered chat events for dedup.
"""
