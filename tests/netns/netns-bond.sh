#!/bin/sh
# The real bonding driver: active-backup failover, 802.3ad member loss and
# removal, a VLAN on a bond (SKIP without bonding / 8021q: run in the VM tier).
"$(dirname "$0")/run-netns.sh" --require=bond "[bond]"
rc=$?
[ $rc = 0 ] || exit $rc
exec "$(dirname "$0")/run-netns.sh" --require=bond --require=vlan "[bondvlan]"
