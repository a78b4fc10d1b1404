"""Nodes with their own network addresses on one machine, for tests of what crosses a network.

A Network makes a "switch" namespace holding a bridge, and a namespace a node, each joined to the
bridge by a veth pair and given 10.N.0.k/24 (k = 1, 2, ...). Nothing is added to the namespace
the test runs in: every address and link lives in the namespaces made here, which are removed
(links and all) when the Network is closed, and by an atexit hook if the test dies first. It
needs root (CAP_NET_ADMIN) and iproute2; `unavailable()` says why not, for a skip.

A node runs commands with `node.popen(argv)`: inside its namespace, in a UTS namespace of its own
whose host name is its address, so that software that names its host by gethostname() (torchrun's
agents, Gloo's default device) names an address the other nodes can reach.

Faults: `cut(node)` takes the node's link to the bridge down (a partition: packets vanish, no
reset), `mend(node)` brings it back; `throttle(node, rate)` holds what it sends to a rate;
`kill(node)` SIGKILLs every process in its namespace at once (a node that dies)."""
import atexit
import os
import signal
import subprocess
import time


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def unavailable():
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", "unshare"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            return f"{tool} is not installed (iproute2, util-linux)"
    probe = f"vsprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


class Node:
    def __init__(self, network, index):
        self.network = network
        self.name = f"{network.prefix}n{index}"
        self.address = f"10.{network.subnet}.0.{index + 1}"
        self.port_side = f"{network.prefix}p{index}"  # the veth end on the bridge
        self.processes = []

    def popen(self, argv, **kwargs):
        """`argv` started inside this node; its own session, so that it can be killed whole."""
        wrapped = ["ip", "netns", "exec", self.name, "unshare", "--uts", "sh", "-c",
                   f'hostname {self.address} && exec "$@"', "node", *argv]
        proc = subprocess.Popen(wrapped, start_new_session=True, **kwargs)
        self.processes.append(proc)
        return proc

    def pids(self):
        listed = _ip("netns", "pids", self.name, check=False).stdout.split()
        return [int(p) for p in listed]


class Network:
    """`count` nodes on one bridge. Use as a context manager."""

    def __init__(self, count, subnet=None):
        self.prefix = f"vs{os.getpid()}"
        # A /24 per test process, out of the way of common private ranges' first subnets.
        self.subnet = subnet if subnet is not None else 100 + os.getpid() % 100
        self.switch = f"{self.prefix}sw"
        self.nodes = [Node(self, i + 1) for i in range(count)]
        self.closed = False
        atexit.register(self.close)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self):
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for node in self.nodes:
            _ip("netns", "add", node.name)
            _ip("-n", node.name, "link", "set", "lo", "up")
            # Made in the node, its far end moved to the switch: nothing touches our namespace.
            _ip("-n", node.name, "link", "add", "eth0", "type", "veth", "peer", "name",
                node.port_side, "netns", self.switch)
            _ip("-n", self.switch, "link", "set", node.port_side, "master", "br0")
            _ip("-n", self.switch, "link", "set", node.port_side, "up")
            _ip("-n", node.name, "addr", "add", f"{node.address}/24", "dev", "eth0")
            _ip("-n", node.name, "link", "set", "eth0", "up")
        self._wait_until_linked()

    def _wait_until_linked(self, timeout=10.0):
        """Until every port of the bridge and every node's end says it is up (no STP: a bridge
        forwards as soon as its ports are)."""
        ends = [(self.switch, n.port_side) for n in self.nodes] + [(n.name, "eth0") for n in self.nodes]
        deadline = time.monotonic() + timeout
        for namespace, link in ends:
            while "state UP" not in _ip("-n", namespace, "link", "show", link).stdout:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{link} in {namespace} did not come up in {timeout} s")
                time.sleep(0.05)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def cut(self, node):
        _ip("-n", self.switch, "link", "set", node.port_side, "down")

    def mend(self, node):
        _ip("-n", self.switch, "link", "set", node.port_side, "up")

    def throttle(self, node, rate):
        """Holds what the node sends to `rate` (tc's units: "1mbit"): a slow link. A token-bucket
        filter, not netem's delay: kernels built without netem (this machine's) have tbf."""
        subprocess.run(["tc", "-n", node.name, "qdisc", "replace", "dev", "eth0", "root", "tbf",
                        "rate", rate, "burst", "16kbit", "latency", "500ms"], check=True,
                       capture_output=True)

    def kill(self, node):
        """SIGKILL every process in the node's namespace, at once."""
        for pid in node.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self):
        if self.closed:
            return
        self.closed = True
        for node in self.nodes:
            self.kill(node)
            for proc in node.processes:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            _ip("netns", "del", node.name, check=False)
        _ip("netns", "del", self.switch, check=False)
