"""How long ``import mpicoll`` and the first ``mpicoll.Comm`` take
beyond numpy and mpi4py.MPI.

Starts ``--runs`` fresh interpreters; each imports numpy and mpi4py.MPI,
then ``import mpicoll``, then touches ``mpicoll.Comm`` (which loads the
faces and the engine), timing each step with ``time.perf_counter``.
Prints the median and range of each step, and for each step the number
of mpicoll modules it loads and their own time by ``-X importtime``.

    python bench/import_time.py [--runs 11]
"""
import argparse
import re
import statistics
import subprocess
import sys

PROBE = ("import time; t0 = time.perf_counter(); import numpy, mpi4py.MPI; "
         "t1 = time.perf_counter(); import mpicoll; t2 = time.perf_counter(); "
         "mpicoll.Comm; t3 = time.perf_counter(); "
         "print((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3)")
STEPS = (("import mpicoll", "import mpicoll"),
         ("then mpicoll.Comm", "import mpicoll; mpicoll.Comm"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    times = [[], [], []]
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", PROBE], check=True,
                             capture_output=True, text=True).stdout.split()
        for column, value in zip(times, out):
            column.append(float(value))
    print(f"numpy + mpi4py.MPI: {_spread(times[0])} over {args.runs} runs")
    for (label, code), column in zip(STEPS, times[1:]):
        trace = subprocess.run(
            [sys.executable, "-X", "importtime", "-c",
             f"import numpy, mpi4py.MPI; {code}"],
            check=True, capture_output=True, text=True).stderr
        ours = [int(t) for t, name in re.findall(
            r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", trace)
            if name.split(".")[0] == "mpicoll"]
        print(f"{label}: {_spread(column)}; {len(ours)} mpicoll modules, "
              f"{sum(ours) / 1e3:.1f} ms of their own (-X importtime)")


def _spread(values) -> str:
    return (f"median {statistics.median(values):.1f} ms "
            f"({min(values):.1f}-{max(values):.1f})")


if __name__ == "__main__":
    main()
