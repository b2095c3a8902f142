"""tools.queues"""
