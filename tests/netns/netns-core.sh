#!/bin/sh
# Addresses, link state, MTU, macvlan stacking, bridge ports, start/stop.
exec "$(dirname "$0")/run-netns.sh" "[netns]~[vlan]~[overflow]"
