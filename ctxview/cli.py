"""The ``ctxview`` command (a console script): ``ctxview check`` and ``ctxview proxy``.

Nothing here configures Django or touches a database: ``ctxview check`` needs neither a server nor a
settings module (its engine configures a private one in memory when it runs the pipeline).
"""

import argparse
import sys

from ctxview.check import command as check


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(prog="ctxview", description="ctxview from the command line.")
    subcommands = found.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check.add_parser(subcommands)
    proxy = subcommands.add_parser(
        "proxy", help="record the calls of an agent without telemetry (its own --help)", add_help=False
    )
    del proxy  # listed for the help: main() hands "proxy ..." to the proxy's own parser
    return found


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["proxy"]:  # its options are its own parser's (argparse's REMAINDER drops a leading --x)
        from ctxview.proxy import cli as proxy_cli

        return proxy_cli.main(argv[1:])
    args = parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
