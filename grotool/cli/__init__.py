"""grotool's command line: click and rich live here and nowhere else.

Exit codes: see EXIT_CODES_HELP (also README.md, "Exit codes").
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import sys
import threading

from typing import TYPE_CHECKING

import click

from .. import __version__
from .._build import engine_build
from ..errors import EXIT_BAD_INPUT, EXIT_INPUT_TRUNCATED, EXIT_SIGNAL_BASE, GrotoolError, Interrupted
from ..interrupts import interrupt, uninterrupted
from ..engine.config import (DEFAULT_RSS_KEY, MAX_GRO_FLUSH_TIMEOUT_NS, MAX_POLL_NS_PER_FRAME, MAX_RX_USECS,
                             OUTGOING_MODES, RSS_KEY_MIN, Settings, ipv4_max_size_for)

if TYPE_CHECKING:
    from rich.console import Console

# rich is imported where something is rendered: a quiet replay (-q, the
# benchmark's and many CI jobs' way to run it) never loads it.

EXIT_CODES_HELP = """\b
Exit codes:
  0    success
  1    a check found a difference (compare)
  2    usage error
  3    unreadable, corrupt or unsupported input
  4    environment: missing privilege or tool, unreliable kernel run
  5    an output could not be written (directory, permission, disk full)
       or is an input file (same file, symlink or hard link: refused before
       reading); no partial file is left behind
  6    replay: the input's last record was cut short (plain or gzip);
       every complete record was processed and the outputs written
  128+N  stopped by signal N (130 SIGINT, 129 SIGHUP, 143 SIGTERM);
       temporary files removed
  141  the reader of standard output went away (broken pipe)"""

# Wider than any table: piped output (CI logs, `| less`) is not wrapped at 80 columns.
PIPE_WIDTH = 1000
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def make_console(stderr: bool = False) -> Console:
    """A console for data: highlighting off; on a pipe or file (no terminal)
    wide enough that nothing wraps mid-word, whatever COLUMNS says (CI runners
    and test harnesses export COLUMNS=80 for processes without a terminal)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return Console(stderr=stderr, highlight=False)
    return Console(stderr=stderr, highlight=False, width=PIPE_WIDTH)


def _stderr_console() -> Console:
    return make_console(stderr=True)


def _on_signal(signum, _frame):
    # later signals are ignored: the first one is already unwinding and cleaning up
    for sig in HANDLED_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    interrupt(signum)          # raises Interrupted, at once or where an uninterrupted stretch ends


def install_signal_handlers() -> dict:
    """SIGINT, SIGTERM and SIGHUP unwind the command (every writer's cleanup runs,
    temporary files are removed) and exit 128 + the signal number.  Returns the
    previous handlers (restored when the command returns in-process)."""
    previous = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for sig in HANDLED_SIGNALS:
        old = signal.getsignal(sig)
        if old is not signal.SIG_IGN:      # nohup and friends: keep ignoring
            previous[sig] = old
            signal.signal(sig, _on_signal)
    return previous


def _again(signum, _frame):
    signal.signal(signum, signal.SIG_IGN)
    if uninterrupted.pending is not None:      # not raised meanwhile where a stretch ended
        interrupt(uninterrupted.pending)


def _send_again(signum: int) -> None:
    if uninterrupted.pending is not None:
        signal.pthread_kill(threading.main_thread().ident, signum)


def _on_unraisable(previous_hook, unraisable) -> None:
    """An Interrupted raised inside a finalizer or weakref callback is dropped
    there.  Keep it pending (raised where the next uninterrupted stretch ends,
    or when the command returns) and send the signal again from another
    thread, so that it reaches the code the main thread goes back to."""
    exc = unraisable.exc_value
    if isinstance(exc, Interrupted) and threading.current_thread() is threading.main_thread():
        import _thread

        uninterrupted.pending = exc.signum
        signal.signal(exc.signum, _again)
        _thread.start_new_thread(_send_again, (exc.signum,))
        return
    previous_hook(unraisable)


def user_errors(fn):
    """Turn GrotoolError (and broken pipes, signals) into one line and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from ..io.safe_output import remove_temporaries

        previous = {}
        hook = sys.unraisablehook
        try:
            try:
                with uninterrupted:            # a signal from here on reaches the except below
                    previous = install_signal_handlers()
                    if previous:
                        sys.unraisablehook = functools.partial(_on_unraisable, hook)
                result = fn(*args, **kwargs)
                uninterrupted.raise_pending()  # a signal a finalizer dropped, not raised since
                return result
            except GrotoolError as exc:
                remove_temporaries()
                click.echo(f"grotool: error: {exc}", err=True)
                sys.exit(exc.exit_code)
            except BrokenPipeError:
                remove_temporaries()
                try:
                    sys.stdout = open(os.devnull, "w")
                except OSError:
                    pass
                sys.exit(EXIT_SIGNAL_BASE + signal.SIGPIPE)
            except MemoryError:
                remove_temporaries()
                click.echo("grotool: error: out of memory", err=True)
                sys.exit(EXIT_BAD_INPUT)
        except (Interrupted, KeyboardInterrupt) as exc:
            remove_temporaries()
            signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
            click.echo(f"grotool: interrupted by {signal.Signals(signum).name}; temporary files removed", err=True)
            sys.exit(EXIT_SIGNAL_BASE + signum)
        finally:
            remove_temporaries()
            uninterrupted.pending = None
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            sys.unraisablehook = hook          # after the handlers: none of ours can fire any more

    return wrapper


class _Commands(click.Group):
    """The command group; commands defined in modules of their own are imported
    when named (or listed by --help), so a replay does not pay their set-up."""

    MODULES = {"check": "check_cmd", "compare": "compare_cmd", "dpdk": "dpdk_cmd", "explain": "explain_cmd",
               "kernel": "kernel_cmd", "kernels": "kernels_cmd", "plot": "plot_cmd", "reasons": "reasons_cmd",
               "split": "split_cmd", "sweep": "sweep_cmd"}

    def list_commands(self, ctx):
        return sorted(set(self.commands) | set(self.MODULES))

    def get_command(self, ctx, name):
        if name not in self.commands and name in self.MODULES:
            import importlib

            module = importlib.import_module(f"{__name__}.{self.MODULES[name]}")
            self.add_command(getattr(module, name))
        return self.commands.get(name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog=EXIT_CODES_HELP)
@click.version_option(f"{__version__} (engine: {engine_build()})", prog_name="grotool")
def main():
    """What would Linux 6.18 GRO do with this traffic, and why?"""


def _write_json(doc: dict, target: str) -> None:
    from ..io.jsonout import write_json

    write_json(doc, target, what="--json")


def _check_outputs(inputs=(), **outputs) -> None:
    """Every output path is checked before the first input frame is read; none
    may be one of ``inputs`` (the same file: exit 5)."""
    from ..io.safe_output import check_outputs

    check_outputs(list(outputs.values()), list(outputs.keys()), inputs)


def _parse_rss_key(_ctx, _param, value):
    if value is None:
        return DEFAULT_RSS_KEY
    try:
        key = bytes.fromhex(value.replace(":", "").replace("-", ""))
    except ValueError:
        raise click.BadParameter("expected hex bytes, e.g. 6d:5a:56:...") from None
    if len(key) < RSS_KEY_MIN:
        raise click.BadParameter(f"an RSS key has at least {RSS_KEY_MIN} bytes (the IPv6 4-tuple's hash "
                                 f"takes 36 + 4; {len(key)} given)")
    return key


def _render_replay(result, console: Console, top: int) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from ..engine.kernels import cached_profile
    from ..report.flows import flow_label

    totals = result.totals
    kernel = cached_profile(result.document["settings"]["kernel"])
    table = Table(title=f"GRO per flow ({kernel.description})", show_lines=False, header_style="bold")
    table.add_column("flow", overflow="fold")
    table.add_column("in", justify="right")
    table.add_column("out", justify="right")
    table.add_column("super", justify="right")
    table.add_column("avg segs", justify="right")
    table.add_column("max", justify="right")
    table.add_column("top flush reasons", overflow="fold")
    collector = result.collector
    flows = collector.sorted_flows()
    several_interfaces = collector.interfaces_seen > 1
    for fs in flows[:top]:
        reasons = ", ".join(f"{r} {n}" for r, n in fs.reasons.most_common(3))
        avg = fs.packets_in / fs.packets_out if fs.packets_out else 0
        label = flow_label(fs.flow)
        if several_interfaces:
            label = f"{collector.interface_name(fs.interface)}: {label}"
        # data is never markup: an IPv6 address in brackets would vanish
        table.add_row(Text(label), str(fs.packets_in), str(fs.packets_out), str(fs.super_packets),
                      f"{avg:.2f}", str(fs.max_segs), Text(reasons))
    if len(flows) > top:
        table.caption = f"{len(flows) - top} more flows not shown (--top, or --json for all)"
    console.print(table)
    ratio = totals["coalescing_ratio"]
    console.print(
        f"[bold]total[/bold]: {totals['packets_in']} packets in, {totals['packets_out']} out, "
        f"{totals['super_packets']} super-packets, coalescing ratio {ratio:.2f}, "
        f"{totals['flows']} flows, {totals['polls']} polls"
    )
    hist = ", ".join(f"{r} {n}" for r, n in totals["flush_reasons"].items())
    console.print(f"[bold]reasons[/bold]: {escape(hist)}")


from ..report.hints import host_hint  # noqa: E402
from .hostopts import host_options, host_settings, kernel_option, layout_option  # noqa: E402
from .dpdkopts import DPDK_KEYS as _DPDK_KEYS, dpdk_options as _dpdk_options  # noqa: E402


@main.command(epilog=EXIT_CODES_HELP)
@click.argument("input_path", metavar="INPUT", type=str)
@click.argument("output_path", metavar="[OUTPUT]", type=str, required=False)
@click.option("--device", type=click.Choice(["nic", "veth"]), default="nic", show_default=True,
              help="nic: RSS NIC driven by capture timestamps; veth: the kernel oracle's conditions.")
@click.option("--budget", type=click.IntRange(1, 65536), default=64, show_default=True,
              help="NAPI weight: frames per poll.")
@click.option("--csum", type=click.Choice(["auto", "verify", "trust"]), default="auto", show_default=True,
              help="Input TCP checksums: verify all, trust all, or auto (a field holding the pseudo-header "
                   "seed counts as offloaded).")
@click.option("--l4-csum", type=click.Choice(["partial", "full"]), default="partial", show_default=True,
              help="Output TCP checksum of super-packets: the kernel's pseudo-header seed, or a full valid one.")
@click.option("--gro/--no-gro", default=True, show_default=True, help="ethtool generic-receive-offload.")
@click.option("--vlan-gro/--no-vlan-gro", default=True, show_default=True,
              help="Kernel built with CONFIG_VLAN_8021Q (802.1Q/802.1ad GRO offloads); off: tagged frames never merge.")
@click.option("--gro-max-size", type=click.IntRange(0, 524280), default=65536, show_default=True,
              help="ip link gro_max_size (IPv6; above 65536 is BIG TCP).")
@click.option("--gro-ipv4-max-size", type=click.IntRange(0, 524280), default=None,
              help="ip link gro_ipv4_max_size [default: --gro-max-size when that is at most 65536, else 65536: "
                   "setting gro_max_size sets it too (netif_set_gro_max_size)].")
@click.option("--max-skb-frags", type=click.IntRange(1, 45), default=17, show_default=True,
              help="CONFIG_MAX_SKB_FRAGS (skb layout only).")
@click.option("--gro-normal-batch", type=click.IntRange(1, 1 << 20), default=8, show_default=True,
              help="net.core.gro_normal_batch (segments per delivery batch).")
@click.option("--hz", type=click.Choice(["100", "250", "300", "1000"]), default="250", show_default=True,
              help="CONFIG_HZ: jiffies for packet age and the budget-exhausted flush rule.")
@click.option("--rx-queues", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="nic: RX queues (NAPI instances), chosen by RSS hash.")
@click.option("--rss-key", callback=_parse_rss_key, default=None,
              help="nic, and veth with --rss: Toeplitz key in hex (default: the common 40-byte key).")
@click.option("--rss", "veth_rss", is_flag=True,
              help="veth: give each frame the RSS hash the nic device computes, spreading flows over the "
                   "8 GRO buckets (the conditions of grotool kernel --rss); nic always hashes.")
@click.option("--rx-usecs", type=click.IntRange(0, MAX_RX_USECS), default=8, show_default=True,
              help="nic: interrupt moderation delay (ethtool -C rx-usecs).")
@click.option("--rx-frames", type=click.IntRange(0, 1_000_000), default=32, show_default=True,
              help="nic: interrupt after this many frames (ethtool -C rx-frames; 0 off).")
@click.option("--gro-flush-timeout", type=click.IntRange(0, MAX_GRO_FLUSH_TIMEOUT_NS), default=0, show_default=True,
              help="nic: /sys/class/net/DEV/gro_flush_timeout in ns.")
@click.option("--napi-defer-hard-irqs", type=click.IntRange(0, 1 << 31), default=0, show_default=True,
              help="nic: /sys/class/net/DEV/napi_defer_hard_irqs.")
@click.option("--poll-ns-per-frame", type=click.IntRange(0, MAX_POLL_NS_PER_FRAME), default=0, show_default=True,
              help="nic: time a poll spends per frame; frames arriving meanwhile join the running poll "
                   "(0: polls take no time).")
@click.option("--outgoing", type=click.Choice(list(OUTGOING_MODES)), default="pass", show_default=True,
              help="Packets the capture marks as sent by the capturing host (cooked capture packet type "
                   "outgoing, pcapng direction flag outbound): pass them through unchanged outside GRO "
                   "(reason outgoing), or receive them as if they had arrived (docs/captures.md).")
@click.option("--json", "json_path", metavar="FILE", default=None, help="Write the statistics document ('-': stdout).")
@click.option("--packets", "packets_path", metavar="FILE", default=None,
              help="Write one JSON line per delivered packet: segments, gso_size, reason, input frames covered.")
@click.option("--mtu", type=click.IntRange(68, 1 << 20), default=None,
              help="Link MTU: frames whose packet is longer (a host capture with TSO/GRO) are counted and warned "
                   "about [default: the MTU the capture implies, at least 1500; docs/mtu.md].")
@click.option("--top", type=click.IntRange(0, 1 << 30), default=20, show_default=True, help="Flows shown in the table.")
@click.option("--format", "output_format", type=click.Choice(["pcap", "pcapng"]), default=None,
              help="OUTPUT format (default: pcapng for a name ending in .pcapng, else pcap). pcapng carries a "
                   "comment per packet: segments, gso_size, gso_type, input frames covered, reason.")
@click.option("--plot", "plot_path", metavar="FILE", default=None,
              help="Also draw the plot of `grotool plot` (needs the 'plot' extra: matplotlib).")
@click.option("--quiet", "-q", is_flag=True, help="No table, no progress bar.")
@click.option("--verify", is_flag=True,
              help="Split every delivered packet again (as GSO would) and check it reproduces the input frames "
                   "it covers; exit 1 naming the first input frame that differs (docs/split.md).")
@click.option("--stack", type=click.Choice(["linux", "dpdk"]), default="linux", show_default=True,
              help="Whose GRO: Linux's, or DPDK's lib/gro (22.11) with the --dpdk-* and --burst knobs "
                   "(docs/dpdk.md); with dpdk the Linux settings do not apply.")
@_dpdk_options
@host_options
@layout_option
@kernel_option
@user_errors
def replay(input_path, output_path, device, budget, csum, l4_csum, gro, vlan_gro, gro_max_size, gro_ipv4_max_size,
           max_skb_frags, gro_normal_batch, hz, rx_queues, rss_key, veth_rss, rx_usecs, rx_frames,
           gro_flush_timeout, napi_defer_hard_irqs, poll_ns_per_frame, outgoing, json_path, packets_path, mtu, top,
           output_format, plot_path, quiet, verify, layout, stack, **host):
    """Replay INPUT (pcap/pcapng, gzip ok, '-' for stdin) through simulated GRO;
    write what Linux would deliver to OUTPUT (pcap, or annotated pcapng for a name
    ending in .pcapng or with --format pcapng; '-' for stdout).  Without OUTPUT
    only the statistics are produced."""
    if stack == "dpdk":
        from .dpdk_cmd import replay_dpdk

        return replay_dpdk(input_path, output_path, json_path, quiet, host)
    for name in _DPDK_KEYS:
        host.pop(name)
    from ..replay import replay as run_replay

    gro_ipv4_max_size = ipv4_max_size_for(gro_max_size, gro_ipv4_max_size)

    settings = Settings(device=device, budget=budget, csum=csum, l4_csum=l4_csum, gro=gro, vlan_gro=vlan_gro,
                        gro_max_size=gro_max_size, gro_ipv4_max_size=gro_ipv4_max_size,
                        max_skb_frags=max_skb_frags, gro_normal_batch=gro_normal_batch, hz=int(hz),
                        rx_queues=rx_queues, rss_key=rss_key, rx_usecs=rx_usecs, rx_frames=rx_frames,
                        gro_flush_timeout=gro_flush_timeout, napi_defer_hard_irqs=napi_defer_hard_irqs,
                        poll_ns_per_frame=poll_ns_per_frame, veth_rss=veth_rss, layout=layout or "",
                        outgoing=outgoing, kernel=host.pop("kernel"), **host_settings(host))
    if output_path == "-" and json_path == "-":
        raise click.UsageError("OUTPUT and --json cannot both be standard output")
    _check_outputs([input_path], **{"output capture": output_path, "--json": json_path,
                                     "--packets": packets_path, "--plot": plot_path})
    from .extras import replay_extras

    with replay_extras(input_path, settings, plot_path, quiet) as extras:
        result = run_replay(input_path, output_path, settings, packets_path, mtu=mtu, output_format=output_format,
                            observers=extras.observers, progress=extras.progress, verify=verify)
    to_stdout = output_path == "-" or json_path == "-" or packets_path == "-"
    st = result.engine_stats
    if st.csum_offloaded or st.csum_bad:
        click.echo(
            f"grotool: warning: {st.csum_offloaded} TCP/UDP checksums taken as offloaded (field held the "
            f"pseudo-header seed), {st.csum_bad} bad (sent up alone), {st.csum_verified} verified",
            err=True,
        )
    if result.over_mtu:
        record, length = result.first_over_mtu
        implied = "" if mtu is not None else " this capture implies"
        click.echo(
            f"grotool: warning: {result.over_mtu} frames longer than the link MTU{implied} {result.mtu} (first: "
            f"record {record}, {length} bytes): captured on a host with TSO/GRO, not what a NIC receives; "
            f"`grotool split --mtu {result.mtu}` re-segments such a capture",
            err=True,
        )
    _warn_invalid_timestamps(result.input_info)
    hint = host_hint(settings, st)
    if hint:
        click.echo(f"grotool: {hint}", err=True)
    if json_path:
        _write_json(result.document, json_path)
    if not quiet:
        _render_replay(result, _stderr_console() if to_stdout else make_console(), top)
    _leave_for_exit(result.collector)       # read no more
    if verify:
        _report_verify(result.verify)
    if result.truncation:
        t = result.truncation
        click.echo(
            f"grotool: warning: {result.input_info['path']}: record {t['record']} at byte offset "
            f"{t['offset']} cut short ({t['detail']}); the {result.frames} complete records before it were "
            f"processed (exit {EXIT_INPUT_TRUNCATED})",
            err=True,
        )
        sys.exit(EXIT_INPUT_TRUNCATED)


def _warn_invalid_timestamps(input_info: dict) -> None:
    """One warning line for records read with the previous record's timestamp."""
    count = input_info.get("invalid_timestamps")
    if not count:
        return
    first = input_info["first_invalid_timestamp"]
    click.echo(f"grotool: warning: {input_info['path']}: {count} record{'s' if count > 1 else ''} with an invalid "
               f"timestamp (first: record {first['record']} at byte offset {first['offset']}, {first['detail']}) "
               "read with the previous record's timestamp", err=True)


def _report_verify(outcome) -> None:
    """replay --verify: one line on standard error; exit 1 on a difference."""
    from ..errors import EXIT_DIFFERENT

    if outcome.ok:
        click.echo(f"grotool: verify: ok, {outcome.frames} input frames reproduced by splitting "
                   f"{outcome.packets} delivered packets ({outcome.super_packets} super-packets)", err=True)
        return
    click.echo(f"grotool: verify: FAILED: {outcome.message}", err=True)
    sys.exit(EXIT_DIFFERENT)


# every other command lives in a module of its own (_Commands.MODULES), imported
# when it is named: a replay builds the options of no other command.


# net container allocations between young collections of the cycle collector (run())
YOUNG_COLLECTION_EVERY = 100_000

# set by run(): this process is the grotool program, which ends when its command returns
_process_ends_with_command = False


def _leave_for_exit(records) -> None:
    """In the grotool program (run()), leave a replay's flow records, which
    ``records`` holds, to the operating system at exit instead of freeing them
    one object at a time: that is 3.7% of the instructions of a statistics-only
    replay of 10,000 flows.  They go into a list that holds itself, and
    gc.freeze sets it aside with every object alive now: no collection looks
    at frozen objects again, not even the last one at exit.  Only for plain
    data (FlowStats, names, tallies: no finalizer, no file), and never when
    main() runs inside another program (tests, a caller of the CLI), whose
    memory it would keep."""
    if not _process_ends_with_command:
        return
    holder = [records]
    holder.append(holder)
    gc.freeze()


def run() -> None:
    """The grotool program (console script and ``python -m grotool``): main()
    with the cycle collector tuned for a process that replays.  A replay makes
    no reference cycles (tests/test_gc.py: the cyclic garbage left by a 20,000-
    packet replay is what a 1-packet replay leaves), so the collector only
    re-examines live objects: the flows' records, the engine's held packets.
    The objects made at start-up (modules, functions, tables) are set aside for
    good, and young collections run every 100,000 net allocations instead of
    700 (5,000 before: 3.6% of the instructions of a replay of 10,000 flows).
    grotool.__main__ keeps the collector off while the program is imported
    (3% of the start-up's instructions) and this turns it on again.
    (Not done by main() itself: a program calling it keeps its own settings.)"""
    global _process_ends_with_command
    _process_ends_with_command = True
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, 10, 10)
    gc.enable()
    main(prog_name="grotool")
