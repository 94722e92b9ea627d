#!/bin/sh
# A backend plugin exports its two entry points and nothing else (reference/plugins.md §5):
# no libstdc++ instantiation, no helper a host symbol could clash with.
# usage: plugin_exports_test.sh PLUGIN_SO
set -eu
syms=$(nm -D --defined-only "$1" | awk '{ print $NF }' | sort | tr '\n' ' ')
if [ "$syms" != "tensor_plugin_init tensor_plugin_score " ]; then
  echo "FAIL: $1 exports: $syms"; exit 1
fi
echo "ok: $1 exports only tensor_plugin_init and tensor_plugin_score"
