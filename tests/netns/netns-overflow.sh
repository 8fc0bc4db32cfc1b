#!/bin/sh
# A burst against a slow subscriber and a tiny socket buffer: ENOBUFS, resync.
exec "$(dirname "$0")/run-netns.sh" "[overflow]"
