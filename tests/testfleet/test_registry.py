"""Pure parts of the test fleet: which slots the machine already uses, inventory overrides."""

from __future__ import annotations

from tests.testfleet.hosts import deep_merged
from tests.testfleet.registry import OUR_NAMES, OUR_SUBNET, slots_in

# `ip netns list`, `ip -o link`, `ip -o -4 addr` and `ip -4 route` as this machine printed them.
NETNS = "fleet-tf-17 (id: 3)\nfleet-tf-probe-4242\ntdv1 (id: 0)\n"
LINKS = (
    "7: tdvh1@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default\\"
    "    link/ether 9a:0c:4e:11:aa:01 brd ff:ff:ff:ff:ff:ff link-netns tdv1\n"
    "12: ftf3h@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default\\"
    "    link/ether 02:66:74:66:03:01 brd ff:ff:ff:ff:ff:ff link-netns fleet-tf-3\n"
)
ADDRESSES = (
    "4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever preferred_lft forever\n"
    "9: vh1    inet 10.201.1.1/24 scope global vh1\\       valid_lft forever preferred_lft forever\n"
    "10.201.44.0/24 dev vt44 proto kernel scope link src 10.201.44.1\n"
    "110.201.9.0/24 via 192.0.2.1 dev eth0\n"
    "10.250.2.0/24 dev tdvh2 proto kernel scope link src 10.250.2.1\n"
)


def test_our_namespaces_and_veths_are_found_by_name():
    assert slots_in(NETNS + LINKS, OUR_NAMES) == {17, 3}


def test_any_use_of_the_subnet_blocks_its_slot_whoever_made_it():
    assert slots_in(ADDRESSES, (OUR_SUBNET,)) == {1, 44}


def test_inventory_overrides_merge_deeply_and_none_removes():
    entry = {"engine": {"kind": "sim", "python": "/usr/bin/python3"}, "known_hosts": "/k", "groups": ["testfleet"]}
    merged = deep_merged(entry, {"engine": {"sim_speed": 0.01}, "known_hosts": None, "groups": ["lab"]})
    assert merged == {"engine": {"kind": "sim", "python": "/usr/bin/python3", "sim_speed": 0.01}, "groups": ["lab"]}
    assert entry["engine"] == {"kind": "sim", "python": "/usr/bin/python3"}  # the base is not changed
