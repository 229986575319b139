"""Shared pieces of the reproductions: the secret ``--seed`` option, the command line as
saved, result files (JSON, markdown tables, PNG figures) and the resume of a run.

Nothing here computes a result: the numbers come from the methods' ``fit``
(:mod:`ldpfast.methods`); the report dataclass they return is
:class:`ldpfast.methods._common.FitReport`.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..methods._common import fmt_eps, mean_std

__all__ = ["SECRET_SEED_HELP", "fmt_eps", "markdown_row", "markdown_table", "mean_std",
           "plot_curves", "public_command", "resume_rows", "save_figure", "save_json"]

SECRET_SEED_HELP = ("secret seed of the randomisers, in [0, 2**64): keep it to reproduce the "
                    "run; it is never written to the results (it would rebuild the noise). "
                    "Default: drawn from the OS")


def public_command(prog: str, argv) -> str:
    """The command line as saved with results: the value of ``--seed`` is never recorded.

    The parsers of the reproductions set ``allow_abbrev=False``, so ``--seed`` and
    ``--seed=V`` are the only spellings to mask.
    """
    out, skip = [], False
    for tok in list(argv or []):
        if skip:
            out.append("<secret>")
            skip = False
        elif tok == "--seed":
            out.append(tok)
            skip = True
        elif tok.startswith("--seed="):
            out.append("--seed=<secret>")
        else:
            out.append(tok)
    return " ".join([prog, *out])


def save_json(path: Path, payload) -> Path:
    """Write ``payload`` as indented JSON (creating the folder); non-JSON values as ``str``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path


def resume_rows(path: Path, command: str) -> tuple[list[dict], list[str]]:
    """``(rows, commands)`` of a previous run saved at ``path`` (``--resume``), with
    ``command`` appended to its command list unless it repeats the last one.  No file:
    ``([], [command])``."""
    if not path.exists():
        return [], [command]
    prev = json.loads(path.read_text())
    commands = list(prev.get("commands", [prev.get("command", "")]))
    if not commands or commands[-1] != command:
        commands.append(command)
    return prev.get("rows", []), commands


def markdown_row(cells) -> str:
    """One markdown table row of already formatted cells."""
    return "| " + " | ".join(cells) + " |"


def _cell(v) -> str:
    return "" if v is None else str(v)


def markdown_table(rows: list[dict], cols: list[str], fmt=_cell) -> list[str]:
    """A markdown table (list of lines): header ``cols``, then ``fmt(row.get(col))`` per
    cell (default: ``str``, None as an empty cell)."""
    return ([markdown_row(cols), "|" + "---|" * len(cols)]
            + [markdown_row(fmt(r.get(c)) for c in cols) for r in rows])


def save_figure(fig, path: Path, dpi: int = 120) -> Path:
    """Lay out, save as PNG (creating the folder) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def plot_curves(path: Path, curves: dict[str, tuple[list[float], list[float], list[float]]],
                xlabel: str, title: str, paper: dict[str, tuple[list[float], list[float]]] | None = None,
                *, ref: float | None = None, ref_label: str = "", log_x: bool = True,
                prefix: str = "ldpfast ", title_size: float | None = None) -> Path:
    """Accuracy-vs-budget plot: ``curves[label] = (x, mean, std)`` with error bars (legend
    ``prefix + label``); ``paper[label] = (x, y)`` dashed; ``ref`` a dashed horizontal line
    (e.g. the non-private accuracy) labelled ``ref_label``; log x axis unless ``log_x`` is
    False."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, (xs, mu, sd) in curves.items():
        ax.errorbar(xs, mu, yerr=sd, marker="o", capsize=3, label=f"{prefix}{label}")
    for label, (xs, ys) in (paper or {}).items():
        ax.plot(xs, ys, "x--", alpha=0.7, label=f"paper {label}")
    if ref is not None:
        ax.axhline(ref, ls="--", color="k", alpha=0.6, label=ref_label)
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title, fontsize=title_size)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(fig, path)
