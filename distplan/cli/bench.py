"""`distplan bench`: run benchmark campaigns, report on them, export their results.

    distplan bench run campaign.toml [--db results.db] [--executor local|dask] [--scheduler tcp://HOST:PORT] [--jobs N]
    distplan bench report results.db [--out DIR]
    distplan bench export results.db --csv out.csv | --parquet out.parquet

(`distplan verify results.db` audits a database: see `distplan.bench.verify`.)
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from distplan.cli.args import add_output, given_flags
from distplan.cli.output import say_wrote
from distplan.errors import InputError
from distplan.models.common import print_json

if TYPE_CHECKING:
    from distplan.verify import VerifyReport


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def cmd_run(args: argparse.Namespace) -> int:
    from distplan.bench.campaign import load_campaign
    from distplan.bench.runner import run_campaign

    campaign = load_campaign(args.campaign)
    db = Path(args.db) if args.db else Path(Path(args.campaign).stem + ".db")
    if args.jobs < 1:
        raise InputError("--jobs", f"{args.jobs} must be >= 1")
    if args.dry_run:
        specs = campaign.runs()
        done: set[str] = set()
        if db.is_file():
            from distplan.bench.store import open_existing

            with open_existing(db) as store:
                done = store.done_keys()
        print(f"{campaign.name}: {len(campaign.instances)} instances, {len(specs)} runs, {sum(1 for s in specs if s['run_key'] in done)} already in {db}")
        for note in campaign.notes:
            print(f"note: {note}")
        return 0
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # a polite kill stops the runs cleanly
    try:
        counts = run_campaign(campaign, db, executor=args.executor, jobs=args.jobs, scheduler=args.scheduler, progress=not args.quiet)
    finally:
        signal.signal(signal.SIGTERM, previous)
    for note in counts["notes"]:
        print(f"note: {note}", file=sys.stderr)
    print(
        f"{campaign.name}: {counts['planned']} runs planned, {counts['skipped']} already stored, {counts['stored']} stored now"
        + (f", {counts['by_others']} stored meanwhile by another driver" if counts.get("by_others") else "")
        + (f", {counts['duplicates']} duplicate(s) ignored" if counts["duplicates"] else "")
        + f" -> {db}"
    )
    if counts.get("baseline_rss"):
        print(f"run processes start from {counts['baseline_rss'] / 1e6:.0f} MB resident (preloaded interpreter and solvers)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from distplan.bench.report import summary_json, write_report

    if args.json:
        if ignored := given_flags(args, ("out", "no_figures")):  # (--out was dropped without a word)
            raise InputError(ignored[0], "--json prints the report's tables on stdout and writes no report", f"drop {ignored[0]}, or drop --json")
        print_json(summary_json(args.db), sys.stdout, default=str, indent=1)
        sys.stdout.write("\n")
        return 0
    path = write_report(args.db, args.out, figures=not args.no_figures)
    say_wrote(f"wrote {path}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from distplan.bench.report import export_csv, export_parquet

    if bool(args.csv) == bool(args.parquet):
        raise InputError("bench export", "give exactly one of --csv FILE or --parquet FILE")
    if args.csv:
        n = export_csv(args.db, args.csv)
        say_wrote(f"wrote {n} runs to {args.csv}")
    else:
        n = export_parquet(args.db, args.parquet)
        say_wrote(f"wrote {n} runs to {args.parquet}")
    return 0


#: file suffixes `distplan verify` treats as benchmark databases
DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def verify_target(path: str | Path, instance: str | None = None, *, require_version: bool = False) -> VerifyReport:
    """What ``distplan verify PATH`` checks: a benchmark database (by its suffix) through
    `distplan.bench.verify.verify_database`, any other file as a result document through
    `distplan.verify.verify_path` (``require_version``: theirs). The CLI routes, so
    `distplan.verify` needs no bench."""
    if Path(path).suffix in DATABASE_SUFFIXES:
        from distplan.bench.verify import verify_database

        if instance is not None:
            raise InputError("--instance", "a benchmark database stores its instances", "leave out --instance")
        return verify_database(path, require_version=require_version)
    from distplan.verify import verify_path

    return verify_path(path, instance=instance, require_version=require_version)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("bench", help="solver benchmarking campaigns: run, report, export")
    bench = p.add_subparsers(dest="bench_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    r = bench.add_parser("run", help="run a campaign (TOML); finished runs in the database are skipped")
    r.add_argument("campaign", help="campaign file (.toml)")
    add_output(r, "--db", default=None, help="SQLite results database (default: CAMPAIGN.db in the current directory)")
    r.add_argument("--executor", choices=["local", "dask"], default="local")
    r.add_argument("--scheduler", default=None, help="Dask scheduler address tcp://HOST:PORT (with --executor dask)")
    r.add_argument("--jobs", type=int, default=1, help="runs at a time (local executor)")
    r.add_argument("--dry-run", action="store_true", help="expand the campaign and count runs, run nothing")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_run)

    r = bench.add_parser("report", help="Markdown report with tables, performance profiles and time-to-target plots")
    r.add_argument("db")
    add_output(r, "--out", default=None, directory=True, help="output directory (default: DB-report next to the database)")
    r.add_argument("--no-figures", action="store_true", help="tables only")
    r.add_argument("--json", action="store_true", help="print the report's tables as JSON instead")
    r.set_defaults(func=cmd_report)

    r = bench.add_parser("export", help="export the runs to CSV or Parquet")
    r.add_argument("db")
    add_output(r, "--csv", default=None, metavar="FILE")
    add_output(r, "--parquet", default=None, metavar="FILE")
    r.set_defaults(func=cmd_export)
