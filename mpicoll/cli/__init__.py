"""What the command-line tools share: ``python -m mpicoll.bench``,
``python -m mpicoll.simulate`` and ``python -m mpicoll.calibrate``.

- :mod:`mpicoll.cli.options`: the options they define alike (collectives,
  algorithms, sizes, dtype), their checks, the rank-0 parser;
- :mod:`mpicoll.cli.sizes`: sizes as typed, swept and reported;
- :mod:`mpicoll.cli.tables`: the result table and its per-size summary;
- :mod:`mpicoll.cli.plot`: ``--plot``'s figures.
"""
