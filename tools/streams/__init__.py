"""tools.streams"""
