"""The ``onlinegp`` command. Sub-commands live next to the code they run and are registered here."""

from __future__ import annotations

import typer

from .models.registry import MODELS

app = typer.Typer(help="Online Gaussian-process mapping: missions, streaming experiments, paper benchmarks.",
                  no_args_is_help=True, add_completion=False)
bench_app = typer.Typer(help="Named experiments reproducing the papers' tables and figures.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@app.command("models")
def list_models() -> None:
    """List the registered models."""
    for name, (_, description) in sorted(MODELS.items()):
        typer.echo(f"{name:12s} {description}")


if __name__ == "__main__":
    app()
