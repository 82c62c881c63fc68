"""What schedules cost and do, without running them: the α-β-γ cost model
read off the schedules (``cost``), the published closed forms
(``formulas``), the calibration file that prices them
(``calibration``), the catalogue of algorithms (``catalogue``,
``python -m mpicoll.catalogue``) and schedules as text (``rounds``,
``python -m mpicoll.rounds``). No MPI; may import the algorithms and
below.
"""
