"""tools.verify"""
