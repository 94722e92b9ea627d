#!/bin/sh
# Runs `tensorctl check --device D` (every op on D against the CPU backend); exits 77
# (Meson: skipped) only when this machine has no such device at all. With dtypes after
# the device, one run per dtype (`--dtype T`) instead of every dtype: a reduced grid
# for slow devices (lavapipe), where vulkan_ops already checks every op x dtype.
tensorctl="$1"
device="$2"
shift 2
if ! "$tensorctl" info 2>/dev/null | grep -q "^  ([0-9]*,[0-9]*) *$device"; then
  echo "no $device device on this machine"
  exit 77
fi
if [ $# -eq 0 ]; then
  exec "$tensorctl" check --device "$device"
fi
rc=0
for dtype in "$@"; do
  "$tensorctl" check --device "$device" --dtype "$dtype" || rc=1
done
exit $rc
