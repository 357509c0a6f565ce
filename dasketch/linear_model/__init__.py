"""Linear models solved through random projections and sketches."""

__all__ = []
