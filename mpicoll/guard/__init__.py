"""Safety: check mode (``check_mode``: every rank agrees on each call
first), deadlines (``watchdog``), the guarded faces that apply them
(``guarded``), the launch check (``launch``: one MPI world, not
many of one rank), and the library's own metadata exchanged as JSON, never
pickled (``exchange``). May import the device layer and below.
"""
