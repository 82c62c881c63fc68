"""Collectives without MPI: the data simulator (``data``: every rank's
schedule run on real arrays in one process, checked by ``matching``
for matching, deadlock and aliasing), the time predictor
(``predict``, ``python -m mpicoll.simulate``) and the network
simulation on SimGrid (``simgrid/``). May import selection, the cost
model and below, and the command-line helpers.
"""
