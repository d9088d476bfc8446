"""``tether serve``: the approvals inbox and runs console (the ``tether[web]`` extra).

A thin shell: read the options and the environment into a
:class:`~tether.web.config.ServeConfig`, then :func:`tether.web.serve` until Ctrl-C or
SIGTERM. Settings that cannot work (a public address without ``--auth``, ``--auth token``
without tokens, ``--notify-url`` without ``TETHER_WEBHOOK_SECRET``) are usage errors (exit 2).
"""

from __future__ import annotations

import os

import click

from tether.cli.options import db_option, load_tasks_or_exit, open_store, run_tasks_option
from tether.cli.terminal import printable
from tether.durations import DurationError, parse_duration


def register(group: click.Group) -> None:
    group.add_command(serve)


def _duration(ctx: click.Context, param: click.Parameter, value: str) -> float:
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise click.BadParameter(str(exc)) from None


def _url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.lower().startswith(("http://", "https://")):
        raise click.BadParameter(f"{printable(value)[:80]!r} is not an http(s) URL")
    return value


@click.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback requires --auth token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port to listen on (0: any free port, printed at start).")
@run_tasks_option
@click.option("--auth", type=click.Choice(["none", "token"]), default="none",
              show_default=True, help="token: bearer tokens and a login page; tokens from "
              "TETHER_TOKENS (NAME:TOKEN[:ROLE], comma-separated) or --tokens-file.")
@click.option("--tokens-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="One NAME:TOKEN[:ROLE] a line (role approver, viewer or submitter).")
@click.option("--notify-url", callback=_url, metavar="URL",
              help="POST a signed JSON event here when a run pauses, fails or completes "
              "(HMAC-SHA256 with TETHER_WEBHOOK_SECRET, header X-Tether-Signature).")
@click.option("--worker", is_flag=True,
              help="Also run an embedded worker that continues answered, resumed and "
              "forked runs with the task modules (--tasks, or [tool.tether] tasks).")
@click.option("--link-max-age", default="7d", show_default=True, callback=_duration,
              metavar="DURATION", help="How long a signed approval link stays valid.")
@click.option("--public-url", callback=_url, metavar="URL",
              help="The console's address as people reach it (for links in events); "
              "default http://HOST:PORT.")
@click.option("--secret-file", default=".tether/console.key", show_default=True,
              metavar="FILE", help="The key sessions, CSRF tokens and links are signed "
              "with (made on first use); TETHER_CONSOLE_SECRET overrides it.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: one JSON object per log line, with the trace "
              "and span ids of what it is about.")
@click.option("--workflows", "workflows", multiple=True, metavar="PATH",
              type=click.Path(exists=True), help="A workflow file, plan or directory of "
              "workflows that POST /api/workflows/NAME/runs may start (repeatable).")
def serve(db: str, host: str, port: int, tasks: tuple[str, ...], auth: str,
          tokens_file: str | None, notify_url: str | None, worker: bool,
          link_max_age: float, public_url: str | None, secret_file: str,
          log_format: str = "text", workflows: tuple[str, ...] = ()) -> None:
    """Serve the approvals inbox and runs console (and its JSON API under /api/).

    Answers are recorded in the store (exactly one wins a pause); the runs are continued by
    workers, or by the embedded one with --worker. Stop with Ctrl-C.
    """
    try:
        from tether.web import ServeConfig
        from tether.web import serve as run_console
        from tether.web.config import (
            WEBHOOK_SECRET_ENV,
            AuthMode,
            ConfigError,
            load_secret,
            load_tokens,
        )
    except ImportError as exc:
        raise click.ClickException(f"tether serve needs the web extra ({exc.name} is "
                                   "missing): pip install 'tether[web]'") from None
    from tether.observability.logs import configure_logging

    configure_logging(log_format)
    open_store(db, create=True).close()
    registry = load_tasks_or_exit(tasks, from_pyproject=True) if worker else None
    webhook = os.environ.get(WEBHOOK_SECRET_ENV, "")
    try:
        config = ServeConfig(
            db=db, secret=load_secret(secret_file), host=host, port=port,
            auth=AuthMode(auth), users=load_tokens(tokens_file) if auth == "token" else {},
            tasks=tasks, worker=worker, notify_url=notify_url,
            webhook_secret=webhook.encode() if webhook else None, link_max_age=link_max_age,
            public_url=public_url, workflows=workflows)
        run_console(config, tasks=registry)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
