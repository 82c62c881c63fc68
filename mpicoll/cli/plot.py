"""``--plot``: busbw against message size, one line per algorithm, one panel
per collective (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

import math


def available() -> bool:
    """Whether matplotlib can be imported (the ``plot`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot(records: list[dict], path: str) -> None:
    """Write a PNG of ``records``' busbw (GB/s) by size to ``path``.

    Rows with wrong results and barrier rows (no bytes) are left out;
    ``auto`` is drawn dashed, labelled with the algorithms it chose.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in records if not r["wrong"] and r["nbytes"] > 0]
    collectives = list(dict.fromkeys(r["collective"] for r in rows))
    ncols = min(3, max(len(collectives), 1))
    nrows = max(math.ceil(len(collectives) / ncols), 1)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.6 * nrows),
                             squeeze=False)
    for ax, collective in zip(axes.flat, collectives):
        mine = [r for r in rows if r["collective"] == collective]
        for name in dict.fromkeys(r["algorithm"] for r in mine):
            line = sorted((r["nbytes"], r["busbw_gbps"]) for r in mine
                          if r["algorithm"] == name)
            label = name
            if name == "auto":
                chosen = dict.fromkeys(r["chosen"] for r in mine
                                       if r["algorithm"] == "auto")
                label = f"auto ({', '.join(map(str, chosen))})"
            ax.plot(*zip(*line), marker=".", label=label,
                    linestyle="--" if name == "auto" else "-")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{collective}, {mine[0]['nranks']} ranks")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    for ax in list(axes.flat)[len(collectives):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
