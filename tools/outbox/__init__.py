"""tools.outbox"""
