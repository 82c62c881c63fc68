"""Reading what a caller passes, as mpi4py reads it: buffer acquisition
(``getbuffer``), the message parser (``message``), MPI's argument
checks (``checks``), derived datatypes staged for hand-built code
(``datatypes``), vector messages as schedules see them
(``vectors``), every spelling of a reduction op and its MPI twin
(``mpi_ops``), and torch-style tensors (``tensors``). May import
the device layer and below.
"""
