"""Which algorithm runs, and why: the policy (``policy``: the call's
``algorithm=``, the environment, a rules file, the default rules, the cost
model) and the choices an engine remembers, with explain mode
(``choices``). May import the cost model, the algorithms and below.
"""
