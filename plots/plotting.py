"""What the plotting scripts share: Debian's matplotlib however `python3` resolves, and
the names and sizes every figure uses."""
import os
import sys

DEBIAN_PYTHON = "/usr/bin/python3"
WIDTH_IN = 12.0  # every figure: 1440 px wide at DPI, whatever the number of GPUs
DPI = 120
GIB = 2.0**30


def pyplot():
    """matplotlib.pyplot on the Agg backend; one clear line and exit 3 when it is missing.

    `python3` may be an interpreter without Debian's packages (pyenv, a venv): then the
    script is run again, once, with Debian's /usr/bin/python3, where python3-matplotlib is.
    """
    try:
        import matplotlib
    except ImportError:
        here = os.path.realpath(sys.executable)
        if (os.path.exists(DEBIAN_PYTHON) and here != os.path.realpath(DEBIAN_PYTHON)
                and "PIPESIM_PLOTS_REEXEC" not in os.environ):
            os.environ["PIPESIM_PLOTS_REEXEC"] = "1"
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)
        print("pipesim plots: error: matplotlib is missing (Debian: apt-get install "
              "python3-matplotlib; elsewhere: pip install matplotlib)", file=sys.stderr)
        sys.exit(3)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def legend_above(ax, handles=None, labels=None, ncol=6):
    """A legend in a row above the axes, never over the data."""
    args = (handles, labels) if handles is not None else ()
    ax.legend(*args, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=ncol, fontsize=8,
              frameon=False, borderaxespad=0.0)


def note(fig, text):
    """A line under the figure saying what was grouped or left out, so nothing is silent."""
    if text:
        fig.text(0.01, 0.005, text, fontsize=8, ha="left", va="bottom", style="italic")


def save(fig, path, bottom_note=False):
    fig.tight_layout(rect=(0, 0.04 if bottom_note else 0, 1, 1))
    fig.savefig(path, dpi=DPI)
    w, h = fig.get_size_inches() * DPI
    print(f"{path}: {int(round(w))} x {int(round(h))} px")
