"""Utilities shared by the estimators and entry points."""
