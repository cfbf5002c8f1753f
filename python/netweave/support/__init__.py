"""Infrastructure every role uses: atomic output files (``files``) and the process farm that
spreads independent runs over threads or an MPI job (``parallel``)."""
