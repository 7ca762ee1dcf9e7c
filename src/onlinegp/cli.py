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


# ---------------------------------------------------------------------------------------------- mission (issue 4)
@app.command("mission")
def mission_command(
    env: str = typer.Option(None, "--env", help="bundled environment (see --list-envs) or a .npy/.npz/.tif file; "
                            "default: valley-ridges, the most non-stationary"),
    model: str = typer.Option("poam", "--model", help="registered model (see --list-models)"),
    budget: int = typer.Option(5000, "--budget", help="number of samples to collect"),
    seed: int = typer.Option(0, "--seed", help="seed of the planner, noise, start and model"),
    out: str = typer.Option("runs/mission", "--out", help="run directory"),
    planner: str = typer.Option("max-entropy", "--planner", help="max-entropy, random or lawnmower"),
    init: str = typer.Option("bezier", "--init", help="pilot survey: bezier, or random (paper 000 app. B)"),
    num_inducing: int = typer.Option(None, "--num-inducing", help="model size M (model default if unset)"),
    num_steps: int = typer.Option(None, "--num-steps", help="hyper-parameter steps per update (model default if unset)"),
    kernel: str = typer.Option(None, "--kernel", help="ak, rbf, matern12/32/52 (model default if unset)"),
    resume: bool = typer.Option(False, "--resume", help="continue from the run directory's last completed epoch"),
    animate: bool = typer.Option(False, "--animate", help="also write mission.gif of the map being built"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar or summary"),
    list_envs: bool = typer.Option(False, "--list-envs", help="list bundled environments and exit"),
    list_models: bool = typer.Option(False, "--list-models", help="list models and exit"),
    stop_after_epochs: int = typer.Option(None, "--stop-after-epochs", hidden=True),
) -> None:
    """Active mapping: a vehicle surveys a terrain while an online GP maps it and picks the next waypoint."""
    from .rig import fields, mission as rig_mission

    if list_envs or list_models:
        rows = ([(n, d) for n, (_, d) in fields.ENVIRONMENTS.items()] if list_envs else []) + \
               ([(n, d) for n, (_, d) in sorted(MODELS.items())] if list_models else [])
        for name, description in rows:
            typer.echo(f"{name:17s} {description}")
        return
    config = rig_mission.MissionConfig(env=env or fields.DEFAULT_ENV, model=model, budget=budget, seed=seed,
                                       planner=planner, init=init, num_inducing=num_inducing, num_steps=num_steps,
                                       kernel=kernel, animate=animate)
    try:
        mission = rig_mission.open_mission(config, out, resume=resume)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    try:
        result = rig_mission.run_mission(mission, out, quiet=quiet, stop_after_epochs=stop_after_epochs,
                                         echo=typer.echo)
    except KeyboardInterrupt:
        typer.echo(f"interrupted; continue with: onlinegp mission --resume --out {out} (same options)", err=True)
        raise typer.Exit(130)
    if not quiet:
        typer.echo(rig_mission.describe(result) if result.completed else
                   f"stopped after epoch {result.rows[-1]['epoch']}; continue with --resume --out {out}")
