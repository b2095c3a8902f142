"""tools.remediation"""
