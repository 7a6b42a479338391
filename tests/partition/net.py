"""Hosts on one machine: a network namespace each, all on one bridge in this namespace (which
reaches every host, and is never cut off). A link is cut by giving each end a permanent
neighbour entry for the other with a hardware address nobody has: what either sends the other
goes nowhere, silently, as across a real partition (connections hang, new ones time out; no
netfilter or tc actions needed), and healed by deleting those entries."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field

NOBODY = "02:00:5e:00:de:ad"  # a locally administered address no host here has


@dataclass
class Host:
    """A namespace on the bridge: its name and address."""

    ns: str
    ip: str

    def command(self, args: list[str]) -> list[str]:
        """`args` run inside the namespace: its network only (`ip netns exec` would also
        mount a /sys of its own, hiding the cgroups that judging programs needs)."""
        return ["nsenter", f"--net=/run/netns/{self.ns}", "--", *args]


@dataclass
class Net:
    """The bridge and its hosts; `cut` and `heal` one link, `isolate` a host from others."""

    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    subnet: str = field(default_factory=lambda: f"10.233.{secrets.randbelow(250) + 1}")
    hosts: dict[str, Host] = field(default_factory=dict)
    cuts: set[frozenset[str]] = field(default_factory=set)

    @staticmethod
    def available() -> bool:
        """Root, iproute2, and namespaces and bridges allowed here."""
        if os.geteuid() != 0 or shutil.which("ip") is None:
            return False
        probe = Net()
        try:
            probe.create()
            probe.host("probe")
            return True
        except subprocess.CalledProcessError:
            return False
        finally:
            probe.destroy()

    @property
    def bridge(self) -> str:
        return f"gbp{self.tag}"

    @property
    def gateway(self) -> str:
        """This namespace's address on the bridge."""
        return f"{self.subnet}.1"

    def create(self) -> Net:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        return self

    def host(self, name: str) -> Host:
        """A new host on the bridge."""
        n = len(self.hosts) + 2
        host = Host(f"gbp{self.tag}-{name}", f"{self.subnet}.{n}")
        outside = f"gbp{self.tag}v{n}"
        _ip("netns", "add", host.ns)
        _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", host.ns)
        _ip("link", "set", outside, "master", self.bridge)
        _ip("link", "set", outside, "up")
        _ip("-n", host.ns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
        _ip("-n", host.ns, "link", "set", "eth0", "up")
        _ip("-n", host.ns, "link", "set", "lo", "up")
        self.hosts[name] = host
        return host

    def cut(self, a: str, b: str) -> None:
        """Nothing more crosses between hosts `a` and `b`, either way."""
        if frozenset((a, b)) in self.cuts:
            return
        self.cuts.add(frozenset((a, b)))
        for one, other in ((a, b), (b, a)):
            _ip("-n", self.hosts[one].ns, "neigh", "replace", self.hosts[other].ip,
                "lladdr", NOBODY, "nud", "permanent", "dev", "eth0")  # fmt: skip

    def heal(self, a: str, b: str) -> None:
        """The link between `a` and `b` carries again."""
        if frozenset((a, b)) not in self.cuts:
            return
        self.cuts.discard(frozenset((a, b)))
        for one, other in ((a, b), (b, a)):
            _ip("-n", self.hosts[one].ns, "neigh", "del", self.hosts[other].ip, "dev", "eth0")

    def isolate(self, name: str, *, but: tuple[str, ...] = ()) -> None:
        """Cut `name` from every other host except `but`."""
        for other in self.hosts:
            if other != name and other not in but:
                self.cut(name, other)

    def heal_all(self) -> None:
        for pair in list(self.cuts):
            self.heal(*sorted(pair))

    def destroy(self) -> None:
        for host in self.hosts.values():
            subprocess.run(["ip", "netns", "del", host.ns], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)
        self.hosts.clear()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)
