"""The schedule format: rounds of sends and receives on named buffer spans,
then local copies and reductions (``core``); buffer layouts per
collective (``layout``); binding to arrays (``bind``); what a
reduction op computes (``ops``); messages split below MPI's count
limit (``chunk``); components run by a subset of ranks (``group``);
one rank's rounds relabelled for all (``relabel``). Imports neither
mpi4py nor CuPy.
"""
