"""Reproductions of the papers' tables and figures, each next to the paper's own numbers.

One module per paper (``a2at`` for paper 001, …); each has a ``run(out_dir, …)`` that writes
CSV files, PNG plots and a Markdown summary into ``out_dir`` and returns the key figures.
"""
