"""``--plot``: a PNG of one line per algorithm against message size, one
panel per collective (matplotlib, imported only when a plot is asked for).

:func:`plot_busbw` draws the benchmark's measured bus bandwidth,
:func:`plot_times` the predictor's predicted times.
"""

from __future__ import annotations

import math


def available() -> bool:
    """Whether matplotlib can be imported (the ``plot`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_busbw(records: list[dict], path: str) -> None:
    """Write a PNG of ``records``' busbw (GB/s) by size to ``path``, a
    panel per collective.

    Rows with wrong results and barrier rows (no bytes) are left out;
    ``auto`` is drawn dashed, labelled with the algorithms it chose.
    """
    rows = [r for r in records if not r["wrong"] and r["nbytes"] > 0]
    panels = []
    for collective in dict.fromkeys(r["collective"] for r in rows):
        mine = [r for r in rows if r["collective"] == collective]
        lines = []
        for name in dict.fromkeys(r["algorithm"] for r in mine):
            label = name
            if name == "auto":
                chosen = dict.fromkeys(r["chosen"] for r in mine
                                       if r["algorithm"] == "auto")
                label = f"auto ({', '.join(map(str, chosen))})"
            lines.append((label, name == "auto", sorted(
                (r["nbytes"], r["busbw_gbps"]) for r in mine
                if r["algorithm"] == name)))
        panels.append((f"{collective}, {mine[0]['nranks']} ranks", lines))
    _draw(panels, path, "busbw (GB/s)", log_y=False, title_size=None)


def plot_times(records: list[dict], path: str) -> None:
    """Write a PNG of ``records``' predicted time (µs) by size to
    ``path``, a panel per collective and rank count."""
    rows = [r for r in records if r["nbytes"] > 0]
    panels = []
    for collective, size in dict.fromkeys((r["collective"], r["nranks"])
                                          for r in rows):
        mine = [r for r in rows if (r["collective"], r["nranks"])
                == (collective, size)]
        lines = [(name, False, sorted((r["nbytes"], r["time_us"]["avg"])
                                      for r in mine if r["algorithm"] == name))
                 for name in dict.fromkeys(r["algorithm"] for r in mine)]
        panels.append((f"{collective}, {size} ranks, {mine[0]['model']}, "
                       f"{mine[0]['network']}", lines))
    _draw(panels, path, "predicted time (µs)", log_y=True,
          title_size="small")


def _draw(panels: list, path: str, ylabel: str, *, log_y: bool,
          title_size: str | None) -> None:
    """Write ``panels`` (``(title, lines)``, each line ``(label, dashed,
    points)``) as a PNG to ``path``, three panels a row, sizes on a log₂
    axis; titles at ``title_size`` (None: matplotlib's own)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = min(3, max(len(panels), 1))
    nrows = max(math.ceil(len(panels) / ncols), 1)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.6 * nrows),
                             squeeze=False)
    for ax, (title, lines) in zip(axes.flat, panels):
        for label, dashed, points in lines:
            ax.plot(*zip(*points), marker=".", label=label,
                    linestyle="--" if dashed else "-")
        ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log")
        ax.set_title(title,
                     fontsize=title_size or plt.rcParams["axes.titlesize"])
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
