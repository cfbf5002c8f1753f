"""Reproductions of the papers' evaluations, one module per paper (``netweave reproduce …``)."""
