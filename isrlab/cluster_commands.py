"""``isrlab cluster up|status|down``: a local cluster of real brokers on ZooKeeper
(real_io/cluster.py), started detached or in the foreground, inspected, and stopped."""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

from isrlab.usage import EXIT_OK, UsageError, config_pair, config_value, port_number, positive_int

DEFAULT_DIR = "runs/cluster"


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def cmd_up(args: argparse.Namespace) -> int:
    from real_io.cluster import ClusterError, LocalCluster
    overrides = {key: config_value(value) for key, value in args.config or []}
    try:
        cluster = LocalCluster(args.dir, args.brokers, args.profile, overrides, port=args.port,
                               zk_port=args.zk_port, zk_tick_ms=args.zk_tick_ms, stop_timeout_s=args.timeout,
                               proxy=not args.no_proxy, proxy_with_launcher=args.foreground)
        if args.foreground:
            return _foreground(cluster)
        cluster.start()
    except ClusterError as exc:
        raise UsageError(f"cluster up: {exc}") from None
    _print_started(cluster)
    print(f"  status:    isrlab cluster status --dir {args.dir}")
    print(f"  stop it:   isrlab cluster down --dir {args.dir}")
    return EXIT_OK


def _print_started(cluster) -> None:
    from real_io.cluster import CHROOT
    brokers = len(cluster.broker_ids)
    print(f"cluster of {brokers} broker{'s' if brokers > 1 else ''} up; files in {cluster.directory}")
    print(f"  bootstrap: {cluster.bootstrap}")
    print(f"  zookeeper: {cluster.zk_hosts}{CHROOT}")
    if cluster.proxy is not None:
        host, port = cluster.proxy.address
        print(f"  fault proxy control: {host}:{port} (every link goes through it; docs/real-io.md)")


def _foreground(cluster) -> int:
    """Run until Ctrl-C or SIGTERM (LocalCluster turns SIGTERM and SIGHUP into
    SystemExit), then stop everything and say what was stopped."""
    try:
        with cluster:
            _print_started(cluster)
            print("  running in the foreground: Ctrl-C (or SIGTERM) stops every process", flush=True)
            while True:
                time.sleep(3600)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        for line in cluster.stop_report if cluster.stopped else cluster.stop():
            print(f"  {line}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from real_io.cluster import ClusterError
    from real_io.cluster_status import cluster_status, format_status
    try:
        status = cluster_status(args.dir, read_offsets=not args.no_offsets)
    except ClusterError as exc:
        raise UsageError(f"cluster status: {exc}") from None
    print(json.dumps(asdict(status), indent=2) if args.json else format_status(status))
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    from real_io.cluster import ClusterError, down
    try:
        said = down(args.dir, args.timeout)
    except ClusterError as exc:
        raise UsageError(f"cluster down: {exc}") from None
    print(f"cluster in {args.dir}:")
    for line in said:
        print(f"  {line}")
    return EXIT_OK


def add_parsers(sub) -> None:
    cluster = sub.add_parser("cluster", help="start, inspect or stop a local cluster of real brokers",
                             description="A local cluster for the real-I/O binding: a ZooKeeper and N isrlab serve "
                                         "brokers on 127.0.0.1, with their files and cluster.json in --dir "
                                         "(docs/real-io.md).")
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start ZooKeeper and N brokers",
                            description="Start ZooKeeper and N brokers, wait until every broker listens, print the "
                                        "bootstrap address and exit, leaving them running (or, with --foreground, "
                                        "run until Ctrl-C). Refuses a --dir where a cluster still runs; a stopped "
                                        "cluster's --dir starts again with its data.")
    up.add_argument("--brokers", type=positive_int, default=3, metavar="N", help="brokers, ids 1..N (default 3)")
    up.add_argument("--profile", metavar="P", help="the brokers' behaviour profile (default: isrlab serve's, "
                                                   "kafka-2.7)")
    up.add_argument("--config", type=config_pair, action="append", metavar="KEY=VALUE",
                    help="a broker config override with Kafka's name, for every broker (repeatable)")
    up.add_argument("--port", type=port_number, metavar="PORT",
                    help="the first broker's port; broker i listens on PORT+i-1 (default: free ports)")
    up.add_argument("--zk-port", type=port_number, metavar="PORT", help="ZooKeeper's port (default: a free one)")
    up.add_argument("--zk-tick-ms", type=positive_int, default=2000, metavar="MS",
                    help="ZooKeeper's tickTime (default 2000): it grants sessions of 2 to 20 ticks")
    up.add_argument("--no-proxy", action="store_true",
                    help="connect the nodes directly, without the fault proxy on every link (faster; no network "
                         "faults)")
    up.add_argument("--foreground", action="store_true",
                    help="stay in the foreground and stop everything on Ctrl-C or SIGTERM")
    up.add_argument("--timeout", type=_seconds, default=30.0, metavar="S",
                    help="seconds a process has to stop after SIGTERM before SIGKILL "
                         "when the cluster stops: after Ctrl-C with --foreground, or after a failed start (default 30)")
    up.set_defaults(func=cmd_up)
    status = actions.add_parser("status", help="brokers, controller, leaders, ISRs and offsets",
                                description="Show each broker's process (alive, paused, down), the controller, and "
                                            "per partition its leader, leader epoch, replicas and ISR (from "
                                            "ZooKeeper) and high watermark and log start offset (ListOffsets).")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.add_argument("--no-offsets", action="store_true", help="read ZooKeeper only (no ListOffsets)")
    status.set_defaults(func=cmd_status)
    down = actions.add_parser("down", help="stop every process the cluster started",
                              description="Stop the processes cluster.json names, brokers first (SIGTERM, SIGKILL "
                                          "after --timeout), ZooKeeper last; a pid that now names another process "
                                          "is left alone. Data stays in --dir.")
    down.add_argument("--timeout", type=_seconds, default=30.0, metavar="S",
                      help="seconds a process has to stop after SIGTERM before SIGKILL (default 30)")
    down.set_defaults(func=cmd_down)
    for parser in (up, status, down):
        parser.add_argument("--dir", default=DEFAULT_DIR, help=f"the cluster's directory (default {DEFAULT_DIR})")
