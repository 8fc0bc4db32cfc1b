#!/bin/sh
# A real 802.1Q VLAN (SKIP when the kernel has no 8021q).
exec "$(dirname "$0")/run-netns.sh" --require=vlan "[vlan]"
