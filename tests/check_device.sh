#!/bin/sh
# Runs `tensorctl check --device D` (every op on D against the CPU backend); exits 77
# (Meson: skipped) only when this machine has no such device at all.
tensorctl="$1"
device="$2"
if ! "$tensorctl" info 2>/dev/null | grep -q "^  ([0-9]*,[0-9]*) *$device"; then
  echo "no $device device on this machine"
  exit 77
fi
exec "$tensorctl" check --device "$device"
