"""Schedules: the plan (core), binding it to buffers (plan, layout), and
running it (executor on MPI, simulate in one process)."""
