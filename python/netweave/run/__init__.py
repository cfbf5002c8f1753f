"""Real runs: the TCP executor (``executor``), MPI (``mpi``), the emulated cluster
(``emulate``), the flow model's calibration on it (``calibration``), and process groups that
never outlive netweave (``processes``)."""
