"""Verified fixes: candidates for each root cause (candidates), proven by game days of a changed copy (search), written on request (apply)."""
