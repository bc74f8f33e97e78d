"""``celery locks web``: the operator's page of the app's locks, served on loopback by default.

    celery -A proj locks web [--bind HOST:PORT] [--allow-release] [--token TOKEN]

The page and its JSON are :func:`celery_singleton_lock.web.wsgi_app`'s; this command only serves them.
"""

from __future__ import annotations

import logging
import sys
from typing import Optional

import click

from ..web import wsgi_app
from ..web.guard import TOKEN_ENV
from ..web.serve import DEFAULT_BIND, is_loopback, make_web_server, parse_bind

__all__ = ["web"]


@click.command(name="web")
@click.option("--bind", default=DEFAULT_BIND, show_default=True,
              help="HOST:PORT to listen on ([::1]:PORT for IPv6; a bare PORT listens on 127.0.0.1).")
@click.option("--allow-release", is_flag=True,
              help="Show a Release button per lock and accept POST /api/release (celery locks clear's rules).")
@click.option("--token", default=None,
              help=f"Ask every request for this bearer token (default: ${TOKEN_ENV}, if set).")
@click.pass_context
def web(ctx: click.Context, bind: str, allow_release: bool, token: Optional[str]) -> None:
    """Serve a page of the locks (grouped by lock name, refreshed every second) and GET /api/locks."""
    try:
        host, port = parse_bind(bind)
        app = wsgi_app(ctx.obj.app, allow_release=allow_release, token=token)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--bind" if "bind" in str(exc) else "--token")
    try:
        server = make_web_server(app, host, port)
    except OSError as exc:
        click.echo(f"locks web: cannot listen on {bind}: {exc.strerror or exc}", err=True)
        sys.exit(1)
    if not logging.getLogger().handlers:  # the release lines go to stderr when nobody set logging up
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not is_loopback(host) and app.guard.token is None:
        click.echo(f"locks web: warning: listening on {host}, beyond this host, without a token: anyone who "
                   f"reaches it sees every lock{' and may release them' if allow_release else ''}. "
                   f"Give --token (or ${TOKEN_ENV}).", err=True)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"celery locks web: serving http://{shown}:{server.server_port}/ (release "
               f"{'allowed' if allow_release else 'off'}{', token required' if app.guard.token else ''}); "
               "Ctrl-C to stop")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
